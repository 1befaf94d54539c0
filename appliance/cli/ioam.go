package cli

import (
	crand "crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/linerate/linerate/plugins/ioam"
)

const ioamUsage = `Usage: linerate ioam <command> [flags]

IOAM tools (plugins/ioam, docs/ioam.md).

Commands:
  pot-keys --nodes N [--dir DIR]   deal the Proof of Transit keys of a path of N
                                   nodes and write one key file per node

Run 'linerate ioam <command> --help' for its flags.
`

func cmdIoam(args []string) int { return runIoam(args, os.Stdout, os.Stderr) }

func runIoam(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, ioamUsage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, ioamUsage)
		return 0
	case "pot-keys":
		return ioamPOTKeys(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "linerate ioam: unknown command %q\n\n%s", args[0], ioamUsage)
	return 2
}

const (
	potPrime    = 0xFFFFFFFFFFFFFFC5 // the largest prime below 2^64: the default POT modulus
	maxPOTNodes = 1024               // a path is far shorter; this bounds the dealing's work
)

func ioamPOTKeys(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ioam pot-keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 0, "the path's `N` nodes, the encapsulating and the verifying one included (2 or more)")
	dir := fs.String("dir", ".", "`directory` to write the key files to (made, mode 0700, if missing)")
	prefix := fs.String("prefix", "node", "file names: `PREFIX`1.toml … PREFIXN.toml")
	primeFlag := fs.String("prime", "0x"+strconv.FormatUint(potPrime, 16), "the `modulus`, a prime below 2^64 (decimal or 0x hex)")
	force := fs.Bool("force", false, "replace key files that exist (default: refuse)")
	usage := func(w io.Writer) {
		fmt.Fprintf(w, `Usage: linerate ioam pot-keys --nodes N [--dir DIR] [--prefix PREFIX] [--prime P] [--force]

Deals the keys of one Proof of Transit profile (POT type 0, Shamir secret
sharing; docs/ioam.md) for a path of N nodes: a random secret and public
polynomial, and each node's point, shares and Lagrange constant. It writes one
key file per node, mode 0600, DIR/PREFIX1.toml to DIR/PREFIXN.toml, and prints
their names, never the keys. File N holds the secret: give it to the
verifying node (ioam.decap), file 1 to the encapsulating node (ioam.encap's
pot = { namespace, key_file }) and the others to the transit nodes
(pot = [ { namespace, key_file } ]). A packet proves its path only when every
node of the profile updated it.

Flags:
`)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	fs.Usage = func() { usage(stderr) }
	if wantsHelp(args) {
		usage(stdout)
		return 0
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	failf := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "linerate ioam pot-keys: "+format+"\n", a...)
		return 1
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if *nodes < 2 || *nodes > maxPOTNodes {
		return failf("--nodes %d: a path has 2 to %d nodes, the encapsulating and the verifying one included", *nodes, maxPOTNodes)
	}
	prime, err := strconv.ParseUint(*primeFlag, 0, 64)
	if err != nil {
		return failf("--prime %q is not a 64-bit number", *primeFlag)
	}
	// The keys are secrets: their randomness comes from the OS.
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return failf("no randomness: %v", err)
	}
	keys, err := ioam.DealPOT(*nodes, prime, rand.New(rand.NewChaCha8(seed)))
	if err != nil {
		return failf("--prime %s: %v", *primeFlag, err)
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return failf("%v", err)
	}
	paths := make([]string, len(keys))
	for i := range keys {
		paths[i] = filepath.Join(*dir, fmt.Sprintf("%s%d.toml", *prefix, i+1))
		if _, err := os.Lstat(paths[i]); err == nil && !*force {
			return failf("%s exists: use --force to replace the keys", paths[i])
		}
	}
	for i := range keys {
		if *force {
			if err := os.Remove(paths[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				return failf("%v", err)
			}
		}
		if err := ioam.WritePOTKey(paths[i], &keys[i]); err != nil {
			return failf("%v", err)
		}
		role := "transit"
		switch i {
		case 0:
			role = "encapsulating node"
		case len(keys) - 1:
			role = "verifier (holds the secret)"
		}
		fmt.Fprintf(stdout, "%s\tnode %d of %d, %s\n", paths[i], i+1, len(keys), role)
	}
	return 0
}
