package peers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Group. Self and Members are required; the zero
// value of the rest works.
type Options struct {
	// Self is this member's identity: its listen address as it appears in
	// Members.
	Self string
	// Members are the HOST:PORT addresses of every member, Self included,
	// the same list on every member.
	Members []string
	// Secret is the group's shared secret (required, non-empty).
	Secret []byte
	// ConnectTimeout bounds connecting to a peer (0: 500ms).
	ConnectTimeout time.Duration
	// ItemTimeout bounds one item request, queueing included (0: 5s).
	ItemTimeout time.Duration
	// MaxInFlight bounds the requests in flight to one peer (0: 32).
	MaxInFlight int
	// ProbeInterval is how often peers marked down are probed (0: 1s).
	ProbeInterval time.Duration
	// CacheBytes is this member's cache budget, reported to the other
	// members in health answers for the group-level what-if (< 0: none
	// reported).
	CacheBytes int64
	// Logger receives membership changes (nil: discard).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 500 * time.Millisecond
	}
	if o.ItemTimeout <= 0 {
		o.ItemTimeout = 5 * time.Second
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 32
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// member is one other member of the group, as seen from this one.
type member struct {
	// immutable after New
	addr string
	sem  chan struct{}

	up        atomic.Bool
	requests  atomic.Int64 // item requests sent
	failures  atomic.Int64 // item requests that failed
	bytes     atomic.Int64 // item bytes received and verified
	badCRC    atomic.Int64
	downSince atomic.Int64 // unix nanoseconds, 0 while up
	budget    atomic.Int64 // cache budget it reported; -1 until known
}

// Group is this mount's view of the peer group: who owns which item, which
// peers are live, a client to fetch items from them and a server for their
// requests. It is safe for concurrent use.
type Group struct {
	// immutable after New
	o       Options
	self    int
	members []*member // index self is nil
	hashes  []uint64
	client  *http.Client
	srv     serverStats
	life    context.Context
	cancel  context.CancelFunc

	wg sync.WaitGroup // the prober and the server

	mu     sync.Mutex
	server *http.Server // guarded by mu
}

// ErrNotPeer is returned by Fetch when the item's owner is this member
// (the live set changed since Remote was asked).
var ErrNotPeer = errors.New("item is owned by this member")

// New builds the group's view and starts probing peers that are down.
// Every peer starts up; the first failed request marks it down.
func New(o Options) (*Group, error) {
	o = o.withDefaults()
	if len(o.Secret) == 0 {
		return nil, errors.New("peers: empty secret")
	}
	self := slices.Index(o.Members, o.Self)
	if self < 0 {
		return nil, fmt.Errorf("peers: %q is not in the member list %v", o.Self, o.Members)
	}
	seen := map[string]bool{}
	for _, m := range o.Members {
		if _, _, err := net.SplitHostPort(m); err != nil {
			return nil, fmt.Errorf("peers: member %q: want HOST:PORT", m)
		}
		if seen[m] {
			return nil, fmt.Errorf("peers: member %q listed twice", m)
		}
		seen[m] = true
	}
	g := &Group{o: o, self: self}
	g.members = make([]*member, len(o.Members))
	g.hashes = make([]uint64, len(o.Members))
	for i, addr := range o.Members {
		g.hashes[i] = hashString(addr)
		if i == self {
			continue
		}
		m := &member{addr: addr, sem: make(chan struct{}, o.MaxInFlight)}
		m.up.Store(true)
		m.budget.Store(-1)
		g.members[i] = m
	}
	dialer := &net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}
	g.client = &http.Client{Transport: &http.Transport{
		DialContext:           dialer.DialContext,
		MaxIdleConnsPerHost:   o.MaxInFlight,
		MaxConnsPerHost:       o.MaxInFlight,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: o.ItemTimeout,
		DisableCompression:    true,
	}}
	g.life, g.cancel = context.WithCancel(context.Background())
	g.wg.Add(1)
	go g.probe()
	return g, nil
}

// Self returns this member's identity.
func (g *Group) Self() string { return g.o.Self }

// Handler returns the HTTP handler that serves src's items to the other
// members (GET /v1/item, GET /v1/health; both authenticated).
func (g *Group) Handler(src ItemSource) http.Handler {
	return &handler{src: src, secret: g.o.Secret, now: time.Now, st: &g.srv, remote: g.Remote, budget: g.o.CacheBytes}
}

// Serve serves src's items on ln until Close.
func (g *Group) Serve(ln net.Listener, src ItemSource) {
	srv := &http.Server{Handler: g.Handler(src), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	g.mu.Lock()
	g.server = srv
	g.mu.Unlock()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.o.Logger.Warn("peer server stopped", "err", err)
		}
	}()
}

// Close stops the prober and the server and closes idle connections.
func (g *Group) Close() error {
	g.cancel()
	g.mu.Lock()
	srv := g.server
	g.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Close()
	}
	g.wg.Wait()
	g.client.CloseIdleConnections()
	return err
}

// key is the item key that ownership hashes.
func key(path, version string, chunk int64) string {
	return path + "\x00" + version + "\x00" + strconv.FormatInt(chunk, 10)
}

func (g *Group) live(i int) bool { return i == g.self || g.members[i].up.Load() }

// ownerOf returns the index of the live owner of the item.
func (g *Group) ownerOf(path, version string, chunk int64) int {
	return owner(hashString(key(path, version, chunk)), g.hashes, g.live)
}

// Owner returns the address of the live member that owns the item.
func (g *Group) Owner(path, version string, chunk int64) string {
	return g.o.Members[g.ownerOf(path, version, chunk)]
}

// Remote reports whether another live member owns the item.
func (g *Group) Remote(path, version string, chunk int64) bool {
	return g.ownerOf(path, version, chunk) != g.self
}

// markDown marks m down after a failed request; the prober brings it back.
func (g *Group) markDown(m *member, err error) {
	if m.up.CompareAndSwap(true, false) {
		m.downSince.Store(time.Now().UnixNano())
		g.o.Logger.Warn("peer down; its items come from the backend", "peer", m.addr, "err", err)
	}
}

func (g *Group) markUp(m *member) {
	if m.up.CompareAndSwap(false, true) {
		m.downSince.Store(0)
		g.o.Logger.Info("peer up", "peer", m.addr)
	}
}

// probe checks the peers marked down every ProbeInterval until Close,
// and asks live peers whose cache budget is not known yet for it.
func (g *Group) probe() {
	defer g.wg.Done()
	t := time.NewTicker(g.o.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-g.life.Done():
			return
		case <-t.C:
		}
		for _, m := range g.members {
			switch {
			case m == nil:
			case !m.up.Load():
				if err := g.health(m); err == nil {
					g.markUp(m)
				}
			case m.budget.Load() < 0:
				// A live peer that does not answer stays up: its item
				// requests decide that.
				_ = g.health(m)
			}
		}
	}
}

// health asks m for GET /v1/health within the connect timeout plus one
// second.
func (g *Group) health(m *member) error {
	ctx, cancel := context.WithTimeout(g.life, g.o.ConnectTimeout+time.Second)
	defer cancel()
	resp, err := g.do(ctx, m, "/v1/health")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health of %s: %s", m.addr, resp.Status)
	}
	if b, err := strconv.ParseInt(resp.Header.Get(BudgetHeader), 10, 64); err == nil && b >= 0 {
		m.budget.Store(b)
	}
	return nil
}
