package eventlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rs/zerolog"

	"github.com/partnergiving/giving/domain"
	"github.com/partnergiving/giving/telemetry"
)

// Config says where the ledger lives.
type Config struct {
	Env domain.Environment
	// DataDir holds the embedded server's store. Unused with NATSURL.
	DataDir string
	// NATSURL points at an external NATS server or cluster. Empty means
	// embedded. It may hold credentials: show it only through RedactURL.
	NATSURL string
	// NATSListen is the loopback address the embedded server also listens on,
	// so the CLI and tools can reach a running instance. Empty means no
	// listener. Every client must present the token kept in the data
	// directory (NATSToken).
	NATSListen string
	// Replicas is the replica count of the stream and buckets; 1 when
	// embedded, usually 3 on a cluster.
	Replicas int
	// Duplicates is JetStream's dedup window for Nats-Msg-Id.
	Duplicates time.Duration
	// Memory is what the whole process may use (0: no limit). The embedded
	// server keeps its memory-stored state (the rate-limit bucket) within
	// an eighth of it; the caller sets the Go runtime's limit.
	Memory int64
	// Metrics records appends; nil records nothing.
	Metrics *telemetry.Metrics
	// GroupCommitAt is how many appends may be in flight before the next
	// ones wait to share an atomic batch (group commit); 0 means
	// DefaultGroupCommitAt.
	GroupCommitAt int
	// Log hears the embedded server's warnings and errors.
	Log zerolog.Logger
	// Client names this process's connection to NATS, as the server's
	// monitoring shows it; empty is "giving".
	Client string
	// Unsynced runs the embedded server without syncing each write before
	// acknowledging it. Only giving bench sets it, to fill a ledger fast
	// (Fill); the service never runs with it.
	Unsynced bool
}

// Ledger is an open connection to one environment's ledger.
type Ledger struct {
	cfg  Config
	srv  *server.Server // nil when external
	lock *flock.Flock   // the data directory's, when embedded
	// health is whether the embedded server's store writes (nil when
	// external); stopHealing ends its healer, which closes healed.
	health      *storeHealth
	stopHealing context.CancelFunc
	healed      chan struct{}
	token       string // the embedded server's client token
	nc          *nats.Conn
	// scans is a connection of its own for reads that walk many subjects
	// (Scan): the server answers a connection's requests one after
	// another, and such a read, which makes it walk its whole subject
	// index, held up every append and key-value write queued behind it on
	// nc for tens of milliseconds.
	scans    *nats.Conn
	js       jetstream.JetStream
	stream   jetstream.Stream
	name     string
	subjects Subjects

	bucketsMu sync.Mutex
	buckets   map[string]jetstream.KeyValue

	// turns lines up this process's commands on each aggregate.
	turns turns
	// commit publishes appends, gathering them into batches under load.
	commit *groupCommit
	// lastSeqs shares the stream info requests of concurrent LastSeq calls.
	lastSeqs lastSeqs
}

// MaxEventSize bounds one stored event. An import of 1000 churches, the
// largest command, fits with room to spare: its request is at most 1 MiB.
// A NATS cluster serving the ledger needs max_payload of at least 8 MB.
const MaxEventSize = 4 << 20

// ErrConflict means the aggregate changed since its state was loaded.
var ErrConflict = errors.New("ledger: aggregate changed concurrently")

// Open starts or connects to the ledger and makes sure the stream exists.
func Open(ctx context.Context, cfg Config) (*Ledger, error) {
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.Duplicates <= 0 {
		cfg.Duplicates = 15 * time.Minute
	}
	if cfg.GroupCommitAt <= 0 {
		cfg.GroupCommitAt = DefaultGroupCommitAt
	}
	if _, err := domain.ParseEnvironment(string(cfg.Env)); err != nil {
		return nil, err
	}
	l := &Ledger{cfg: cfg, subjects: Subjects{env: string(cfg.Env)}, name: StreamName(cfg.Env), buckets: map[string]jetstream.KeyValue{}}
	if err := l.connect(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(l.nc)
	if err != nil {
		l.Close()
		return nil, NATSErr("open ledger", err)
	}
	l.js = js
	l.commit = newGroupCommit(js, l.nc, cfg.Metrics, cfg.GroupCommitAt)
	l.lastSeqs.rounds.take, l.lastSeqs.rounds.do = l.lastSeqs.take, l.sendLastSeq
	if l.stream, err = SetUp(ctx, "open ledger stream "+l.name, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, l.streamConfig())
	}); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// DedupWindow is how long the ledger remembers a dedup id: an append under
// an id it stored less than this long ago stores nothing and answers with
// the earlier event.
func (l *Ledger) DedupWindow() time.Duration { return l.cfg.Duplicates }

// StreamName is the JetStream stream holding env's ledger.
func StreamName(env domain.Environment) string { return "LEDGER_" + strings.ToUpper(string(env)) }

func (l *Ledger) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        l.name,
		Description: "Partner Giving ledger (" + string(l.cfg.Env) + "): every domain event, append-only.",
		Subjects:    []string{l.subjects.All()},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Replicas:    l.cfg.Replicas,
		Duplicates:  l.cfg.Duplicates,
		MaxMsgSize:  MaxEventSize + 4<<10, // room for headers
		DenyDelete:  true,
		DenyPurge:   true,
		AllowDirect: true,
		// Group commit stores appends in atomic batches under load.
		AllowAtomicPublish: true,
	}
}

func (l *Ledger) connect() error {
	if l.cfg.NATSURL != "" {
		var err error
		l.nc, l.scans, err = l.connectTwice(func(name string) (*nats.Conn, error) {
			return nats.Connect(l.cfg.NATSURL, nats.Name(name), nats.MaxReconnects(-1))
		})
		if err != nil {
			return fmt.Errorf("connect to nats %s: %w", RedactURL(l.cfg.NATSURL), err)
		}
		return nil
	}
	if l.cfg.DataDir == "" {
		return errors.New("embedded nats: no data directory")
	}
	lock, err := lockDataDir(l.cfg.DataDir)
	if err != nil {
		return err
	}
	if err := l.startEmbedded(lock); err != nil {
		_ = lock.Unlock()
		return err
	}
	return nil
}

// connectTwice makes the ledger's two connections with dial, which names
// each: the main one and the one for scans (Ledger.scans).
func (l *Ledger) connectTwice(dial func(name string) (*nats.Conn, error)) (main, scans *nats.Conn, err error) {
	name := cmp.Or(l.cfg.Client, "giving")
	if main, err = dial(name); err != nil {
		return nil, nil, err
	}
	if scans, err = dial(name + " scans"); err != nil {
		main.Close()
		return nil, nil, err
	}
	return main, scans, nil
}

// startEmbedded runs the embedded server on the locked data directory and
// records the instance there when it listens for operator commands.
func (l *Ledger) startEmbedded(lock *flock.Flock) error {
	dir := l.cfg.DataDir
	if err := removeInstance(dir); err != nil { // a dead process's
		return err
	}
	token, err := ensureNATSToken(dir)
	if err != nil {
		return fmt.Errorf("embedded nats: %w", err)
	}
	health := newStoreHealth()
	srv, err := startEmbedded(l.cfg, token, health)
	if err != nil {
		return err
	}
	if l.cfg.NATSListen != "" {
		if err := writeInstance(dir, srv.Addr().String()); err != nil {
			srv.Shutdown()
			return err
		}
	}
	nc, scans, err := l.connectTwice(func(name string) (*nats.Conn, error) {
		return nats.Connect("", nats.InProcessServer(srv), nats.Name(name), nats.Token(token))
	})
	if err != nil {
		srv.Shutdown()
		_ = removeInstance(dir)
		return NATSErr("connect to embedded nats", err)
	}
	l.srv, l.nc, l.scans, l.token, l.lock, l.health = srv, nc, scans, token, lock, health
	ctx, stop := context.WithCancel(context.Background())
	l.stopHealing, l.healed = stop, make(chan struct{})
	go func() {
		defer close(l.healed)
		l.healStore(ctx, *srv.JetStreamConfig())
	}()
	return nil
}

// startEmbedded runs a nats-server with JetStream under the data directory.
// Every write is synced before it is acknowledged: money is at stake. Every
// client, in this process or on the loopback listener, must present token:
// the ledger holds key hashes and money, and any local user can reach a
// loopback port.
func startEmbedded(cfg Config, token string, health *storeHealth) (*server.Server, error) {
	storeDir := filepath.Join(cfg.DataDir, "jetstream")
	if err := os.MkdirAll(storeDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	opts := &server.Options{
		Authorization: token,
		ServerName:    "giving-embedded",
		JetStream:     true,
		StoreDir:      storeDir,
		SyncAlways:    !cfg.Unsynced,
		NoSigs:        true,
		NoLog:         true,
		DontListen:    true,
		MaxPayload:    8 << 20,
	}
	if cfg.Memory > 0 {
		opts.JetStreamMaxMemory = max(cfg.Memory/8, 16<<20)
	}
	if cfg.NATSListen != "" {
		host, port, err := splitHostPort(cfg.NATSListen)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: --nats-listen: %w", err)
		}
		if port == 0 {
			port = server.RANDOM_PORT
		}
		opts.DontListen, opts.Host, opts.Port = false, host, port
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	srv.SetLoggerV2(natsLog{log: cfg.Log, health: health}, false, false, false)
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("embedded nats: not ready after 30s")
	}
	return srv, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, port, nil
}

// Env is the ledger's environment.
func (l *Ledger) Env() domain.Environment { return l.cfg.Env }

// Subjects returns the subject layout of this ledger.
func (l *Ledger) Subjects() Subjects { return l.subjects }

// Replicas is the replica count of the ledger stream, which the service's
// other streams and buckets follow.
func (l *Ledger) Replicas() int { return l.cfg.Replicas }

// Embedded reports whether the ledger runs inside this process.
func (l *Ledger) Embedded() bool { return l.srv != nil }

// ClientURL is the address other processes can use to reach the embedded
// server (with its token), or the configured NATS URL (with its
// credentials). Show it only through RedactURL.
func (l *Ledger) ClientURL() string {
	if l.srv == nil {
		return l.cfg.NATSURL
	}
	if l.cfg.NATSListen == "" {
		return ""
	}
	u, err := url.Parse(l.srv.ClientURL())
	if err != nil {
		return ""
	}
	u.User = url.User(l.token)
	return u.String()
}

// RedactURL is a NATS URL (or a comma-separated list of them) fit to show:
// a password is replaced by "xxxxx", as net/url's Redacted does, and so is a
// user without a password, which NATS takes as a token.
func RedactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = redactOne(p)
	}
	return strings.Join(parts, ",")
}

// redactOne works on the text rather than on a parsed URL, so that a URL
// net/url cannot parse (a password with a "/" in it) is redacted too. NATS
// URLs have no path, so everything up to the last "@" is user information.
func redactOne(s string) string {
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + len("://")
	}
	at := strings.LastIndex(s[start:], "@")
	if at < 0 {
		return s
	}
	at += start
	user := "xxxxx"
	if name, _, ok := strings.Cut(s[start:at], ":"); ok {
		user = name + ":xxxxx"
	}
	return s[:start] + user + s[at:]
}

// Ping checks that the ledger answers.
func (l *Ledger) Ping(ctx context.Context) error {
	_, err := l.LastSeq(ctx)
	return err
}

// Close flushes and closes the connection and, when embedded, stops the server cleanly.
func (l *Ledger) Close() {
	if l.scans != nil {
		l.scans.Close()
	}
	if l.nc != nil {
		// Flush what was published; callers stop their consumers first.
		_ = l.nc.FlushTimeout(5 * time.Second)
		l.nc.Close()
	}
	if l.stopHealing != nil {
		l.stopHealing()
		<-l.healed
	}
	if l.srv != nil {
		l.srv.Shutdown()
		l.srv.WaitForShutdown()
	}
	if l.lock != nil {
		_ = removeInstance(l.cfg.DataDir)
		_ = l.lock.Unlock()
	}
}

// Bucket opens (creating or updating as needed) a key-value bucket of this
// environment, for the sibling packages. Names are suffixed with the
// environment, so the two stacks never share state, and a file-stored
// bucket has the ledger's replicas.
func (l *Ledger) Bucket(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cfg.Bucket = cfg.Bucket + "_" + strings.ToUpper(string(l.cfg.Env))
	if cfg.Storage == jetstream.FileStorage {
		cfg.Replicas = l.cfg.Replicas
	} else {
		cfg.Replicas = 1
	}
	l.bucketsMu.Lock()
	defer l.bucketsMu.Unlock()
	if kv, ok := l.buckets[cfg.Bucket]; ok {
		return kv, nil
	}
	kv, err := SetUp(ctx, "open bucket "+cfg.Bucket, func(ctx context.Context) (jetstream.KeyValue, error) {
		return l.js.CreateOrUpdateKeyValue(ctx, cfg)
	})
	if err != nil {
		return nil, err
	}
	l.buckets[cfg.Bucket] = kv
	return kv, nil
}
