package peers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// AuthHeader carries "UNIXSECONDS:HEXMAC", the MAC being HMAC-SHA256 under
// the group secret of "METHOD\nPATH?QUERY\nUNIXSECONDS".
const AuthHeader = "X-Stallfs-Auth"

// maxSkew is how far a token's timestamp may be from the server's clock.
const maxSkew = 5 * time.Minute

var errAuth = errors.New("missing or bad authentication token")

func mac(secret []byte, method, target string, ts int64) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(method))
	h.Write([]byte{'\n'})
	h.Write([]byte(target))
	h.Write([]byte{'\n'})
	h.Write([]byte(strconv.FormatInt(ts, 10)))
	return h.Sum(nil)
}

// sign sets the authentication header of req for time now.
func sign(req *http.Request, secret []byte, now time.Time) {
	ts := now.Unix()
	req.Header.Set(AuthHeader, strconv.FormatInt(ts, 10)+":"+hex.EncodeToString(mac(secret, req.Method, req.URL.RequestURI(), ts)))
}

// verify checks the authentication header of req at time now.
func verify(req *http.Request, secret []byte, now time.Time) error {
	tsStr, macHex, ok := strings.Cut(req.Header.Get(AuthHeader), ":")
	if !ok {
		return errAuth
	}
	ts, err := strconv.ParseInt(tsStr, 10, 64)
	if err != nil {
		return errAuth
	}
	if d := now.Sub(time.Unix(ts, 0)); d > maxSkew || d < -maxSkew {
		return errAuth
	}
	got, err := hex.DecodeString(macHex)
	if err != nil || !hmac.Equal(got, mac(secret, req.Method, req.URL.RequestURI(), ts)) {
		return errAuth
	}
	return nil
}
