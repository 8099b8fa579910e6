package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/stallfs/stallfs/fs"
	"github.com/stallfs/stallfs/peers"
)

// peerFlags are the mount flags of the peer group: membership, identity,
// the shared secret and whether this mount caches other owners' items.
func peerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "peers", Usage: "comma-separated `HOST:PORT` list of every member of the peer group (the same list on every member, this one included)", EnvVars: []string{"STALLFS_PEERS"}},
		&cli.StringFlag{Name: "peers-file", Usage: "`FILE` listing the members, one HOST:PORT a line (# comments)", EnvVars: []string{"STALLFS_PEERS_FILE"}},
		&cli.StringFlag{Name: "peers-dns", Usage: "DNS `NAME` that resolves to every member (a Kubernetes headless service); the port is --peer-listen's", EnvVars: []string{"STALLFS_PEERS_DNS"}},
		&cli.StringFlag{Name: "peer-listen", Usage: "`HOST:PORT` this member serves peers on; its identity is this address as it appears in the member list", EnvVars: []string{"STALLFS_PEER_LISTEN"}},
		&cli.StringFlag{Name: "peer-secret-file", Usage: "`FILE` holding the group's shared secret (mode 0600 or stricter)", EnvVars: []string{"STALLFS_PEER_SECRET_FILE"}},
		&cli.BoolFlag{Name: "peer-cache-others", Usage: "also cache items that other members own (when this mount has spare room)", EnvVars: []string{"STALLFS_PEER_CACHE_OTHERS"}},
	}
}

// peerConfig is the validated configuration of the peer group.
type peerConfig struct {
	Listen      string   // address to listen on
	Self        string   // identity: Listen as it appears in Members
	Members     []string // every member, Self included
	Secret      []byte
	CacheOthers bool
}

// readPeerConfig validates the peer flags; it returns nil without any
// membership flag. Every error is a usage error.
func readPeerConfig(c *cli.Context) (*peerConfig, error) {
	var given []string
	for _, f := range []string{"peers", "peers-file", "peers-dns"} {
		if c.String(f) != "" {
			given = append(given, "--"+f)
		}
	}
	if len(given) == 0 {
		for _, f := range []string{"peer-listen", "peer-secret-file", "peer-cache-others"} {
			if c.IsSet(f) {
				return nil, usagef("--%s needs --peers, --peers-file or --peers-dns", f)
			}
		}
		return nil, nil
	}
	if len(given) > 1 {
		return nil, usagef("give one of %s", strings.Join(given, ", "))
	}
	pc := &peerConfig{Listen: c.String("peer-listen"), CacheOthers: c.Bool("peer-cache-others")}
	if pc.Listen == "" {
		return nil, usagef("%s needs --peer-listen HOST:PORT", given[0])
	}
	_, port, err := net.SplitHostPort(pc.Listen)
	if err != nil || port == "" {
		return nil, usagef("--peer-listen %q: want HOST:PORT", pc.Listen)
	}
	switch {
	case c.String("peers") != "":
		pc.Members = splitMembers(c.String("peers"))
	case c.String("peers-file") != "":
		b, err := os.ReadFile(c.String("peers-file"))
		if err != nil {
			return nil, usagef("--peers-file: %w", pathErrCause(err))
		}
		pc.Members = splitMembers(stripComments(b))
	default:
		name := c.String("peers-dns")
		addrs, err := net.LookupHost(name)
		if err != nil {
			return nil, usagef("--peers-dns %q: %w", name, err)
		}
		for _, a := range addrs {
			pc.Members = append(pc.Members, net.JoinHostPort(a, port))
		}
		slices.Sort(pc.Members)
		pc.Members = slices.Compact(pc.Members)
	}
	if len(pc.Members) == 0 {
		return nil, usagef("%s: no members", given[0])
	}
	for _, m := range pc.Members {
		if h, p, err := net.SplitHostPort(m); err != nil || h == "" || p == "" {
			return nil, usagef("%s: member %q: want HOST:PORT", given[0], m)
		}
	}
	if pc.Self, err = identify(pc.Listen, pc.Members); err != nil {
		return nil, usagef("--peer-listen: %w", err)
	}
	if pc.Secret, err = readSecretFile(c.String("peer-secret-file")); err != nil {
		return nil, err
	}
	return pc, nil
}

// splitMembers splits a list separated by commas or white space.
func splitMembers(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

func stripComments(b []byte) string {
	var out strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.String()
}

// identify finds this member in the list: the listen address itself, or,
// when it listens on all addresses (":7070", "0.0.0.0:7070"), the member
// with its port at one of this host's addresses.
func identify(listen string, members []string) (string, error) {
	if slices.Contains(members, listen) {
		return listen, nil
	}
	host, port, _ := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return "", fmt.Errorf("%s is not in the member list", listen)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("list this host's addresses: %w", err)
	}
	var found []string
	for _, m := range members {
		mh, mp, _ := net.SplitHostPort(m)
		mip := net.ParseIP(mh)
		if mp != port || mip == nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(mip) {
				found = append(found, m)
			}
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("%s: %d members on this host's addresses with port %s, want 1 (listen on the address as listed)", listen, len(found), port)
	}
	return found[0], nil
}

// readSecretFile reads the group secret; the file must not be readable by
// group or others.
func readSecretFile(name string) ([]byte, error) {
	if name == "" {
		return nil, usagef("a peer group needs --peer-secret-file")
	}
	st, err := os.Stat(name)
	if err != nil {
		return nil, usagef("--peer-secret-file: %w", pathErrCause(err))
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, usagef("--peer-secret-file %s has mode %04o; want 0600 or stricter", name, st.Mode().Perm())
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, usagef("--peer-secret-file: %w", pathErrCause(err))
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, usagef("--peer-secret-file %s is empty", name)
	}
	return b, nil
}

// peerSetup is the running peer group of one mount.
type peerSetup struct {
	g *peers.Group
	m *fs.Mount
}

// startPeers joins the peer group when one is configured: it listens for
// peers, plugs the group into the read path and serves GET /v1/peers on
// the control socket. Call it from beforeMount.
func (p *pipeline) startPeers(m *fs.Mount) error {
	pc := p.cfg.Peers
	if pc == nil {
		return nil
	}
	ln, err := net.Listen("tcp", pc.Listen)
	if err != nil {
		return usagef("--peer-listen %s: %w", pc.Listen, err)
	}
	var budget int64
	if p.cache != nil {
		budget = p.cfg.MemBytes + p.cfg.DiskBytes
	}
	g, err := peers.New(peers.Options{
		Self:       pc.Self,
		Members:    pc.Members,
		Secret:     pc.Secret,
		CacheBytes: budget,
		Logger:     p.log.With("component", "peers"),
	})
	if err != nil {
		ln.Close()
		return usagef("peers: %w", err)
	}
	m.SetPeers(g, fs.PeerOptions{CacheOthers: pc.CacheOthers})
	g.Serve(ln, m)
	p.peer = &peerSetup{g: g, m: m}
	p.reg.MustRegister(newPeerCollector(func() (peers.Stats, fs.PeerCounters) { return g.Stats(), m.PeerCounters() }))
	m.Handle("GET /v1/peers", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, p.peer.stats())
	}))
	p.log.Info("peer group", "self", pc.Self, "members", len(pc.Members), "listen", ln.Addr().String(), "cache_others", pc.CacheOthers)
	return nil
}

// peerStats is GET /v1/peers and the peers section of GET /v1/stats.
type peerStats struct {
	peers.Stats
	Fills fs.PeerCounters `json:"fills"`
	Group groupWhatIf     `json:"group"`
}

// stats returns the group's view and this mount's fill counters (nil
// without a group).
func (s *peerSetup) stats() *peerStats {
	if s == nil {
		return nil
	}
	st := s.g.Stats()
	return &peerStats{Stats: st, Fills: s.m.PeerCounters(), Group: newGroupWhatIf(st, s.m.DatasetBytes())}
}

// close leaves the group: it stops serving peers and probing them.
func (s *peerSetup) close() {
	if s == nil {
		return
	}
	_ = s.g.Close() // only the listener's close can fail; nothing to do about it
}
