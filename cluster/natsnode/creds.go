package natsnode

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// CredentialsFileName is the file in a node's data directory that holds the nkey
// seed of the user every client of the node authenticates as.
const CredentialsFileName = "gale.nk"

// routeUser is the user name routes between gale's nodes present; the password is
// derived from the seed (routeSecret), so nodes sharing a credentials file share it.
const routeUser = "gale-route"

// CredentialsFile returns the path of the credentials file in dataDir.
func CredentialsFile(dataDir string) string { return filepath.Join(dataDir, CredentialsFileName) }

// credentials is a node's user: the nkey seed and its public key.
type credentials struct {
	seed []byte // "SU..."
	pub  string // "U..."
}

// routeSecret is the password of routes between nodes that share these credentials:
// an HMAC of a fixed label under the seed, so it needs no second file and reveals
// nothing of the seed.
func (c credentials) routeSecret() string {
	m := hmac.New(sha256.New, c.seed)
	m.Write([]byte("gale nats route v1"))
	return hex.EncodeToString(m.Sum(nil))
}

const credsHeader = `# gale nats credentials: the nkey seed of the user every client of this node
# authenticates as (nats.go: nats.NkeyOptionFromSeed; nats CLI: --nkey FILE). Routes
# between nodes use a password derived from it, so the nodes of one cluster share this
# file (gale nats --creds-from). Keep it secret: anyone with it may use the node.
`

func encodeCreds(seed []byte) []byte {
	var b bytes.Buffer
	b.WriteString(credsHeader)
	b.Write(seed)
	b.WriteByte('\n')
	return b.Bytes()
}

// parseCreds reads the seed of a credentials file (one line starting with SU; a
// decorated nkey file as nsc writes it works too).
func parseCreds(path string, data []byte) (credentials, error) {
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return credentials{}, fmt.Errorf("%s: no nkey user seed: %w", path, err)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return credentials{}, fmt.Errorf("%s: %w", path, err)
	}
	if !nkeys.IsValidPublicUserKey(pub) {
		return credentials{}, fmt.Errorf("%s: the seed is not an nkey user's (it should begin with SU)", path)
	}
	seed, err := kp.Seed()
	if err != nil {
		return credentials{}, fmt.Errorf("%s: %w", path, err)
	}
	// Wipe overwrites the key pair's seed, which Seed returns, not a copy.
	return credentials{seed: bytes.Clone(seed), pub: pub}, nil
}

func readCreds(path string) (credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return credentials{}, err
	}
	return parseCreds(path, data)
}

// ensureCredentials returns the credentials of dataDir: those already there, else a
// copy of from's (when from is set), else new ones. The file is written with mode
// 0600 and reused on later starts; a file there that differs from from's is an error
// (the node would refuse the cluster's clients and routes).
func ensureCredentials(dataDir, from string) (c credentials, created bool, err error) {
	path := CredentialsFile(dataDir)
	var want *credentials
	if from != "" {
		fc, err := readCreds(from)
		if err != nil {
			return c, false, fmt.Errorf("--creds-from: %w", err)
		}
		want = &fc
	}
	c, err = readCreds(path)
	switch {
	case err == nil:
		if want != nil && c.pub != want.pub {
			return c, false, fmt.Errorf("%s holds other credentials than %s (user %s, not %s): "+
				"this data directory belongs to another cluster; remove the file to take %s's", path, from, c.pub, want.pub, from)
		}
		return c, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return c, false, err
	}
	if want != nil {
		c = *want
	} else {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return c, false, fmt.Errorf("generating the node's nkey: %w", err)
		}
		defer kp.Wipe()
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		c = credentials{seed: bytes.Clone(seed), pub: pub}
	}
	if err := writeExclusive(path, encodeCreds(c.seed)); err != nil {
		if errors.Is(err, fs.ErrExist) { // another process wrote it first: use that one
			c, err = readCreds(path)
			return c, false, err
		}
		return c, false, err
	}
	return c, true, nil
}

// writeExclusive writes data to path with mode 0600, whole or not at all: into a
// temporary file, synced, then linked to path (which fails if path exists), and
// the directory synced.
func writeExclusive(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".gale.nk-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ClientOptions returns the nats.go options that authenticate a client to the node
// whose data directory is dataDir, with the nkey seed in its credentials file (read
// again at each connection attempt, never kept in memory). The seed itself never
// crosses the wire: the client signs the server's nonce with it.
func ClientOptions(dataDir string) ([]nats.Option, error) {
	path := CredentialsFile(dataDir)
	if _, err := readCreds(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("natsnode: no credentials file %s: is %s the data directory of a gale nats node?", path, dataDir)
		}
		return nil, fmt.Errorf("natsnode: %w", err)
	}
	o, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		return nil, fmt.Errorf("natsnode: %s: %w", path, err)
	}
	return []nats.Option{o}, nil
}

// Connect connects to url with the credentials of the node whose data directory is
// dataDir, then opts. A refusal names the credentials file.
func Connect(url, dataDir string, opts ...nats.Option) (*nats.Conn, error) {
	co, err := ClientOptions(dataDir)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, append(co, opts...)...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) {
			return nil, fmt.Errorf("natsnode: %s refused the credentials in %s (%w): are they this node's?", url, CredentialsFile(dataDir), err)
		}
		return nil, fmt.Errorf("natsnode: connect %s: %w", url, err)
	}
	return nc, nil
}
