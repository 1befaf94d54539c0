// Command mkdocs writes linerate's man page and bash completion from the
// built binary's own help, so that both say what the binary does:
//
//	go run ./packaging/mkdocs -bin bin/linerate -out bin/pkg
//
// writes linerate.1 (troff) and linerate.bash. make deb runs it.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

func main() {
	bin := flag.String("bin", "bin/linerate", "the linerate binary")
	out := flag.String("out", ".", "directory for linerate.1 and linerate.bash")
	flag.Parse()
	if err := run(*bin, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkdocs:", err)
		os.Exit(1)
	}
}

// help is a command's help: its --help output (stdout and stderr).
func help(bin string, args ...string) (string, error) {
	var b bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, b.String())
	}
	return b.String(), nil
}

var (
	commandLine = regexp.MustCompile(`^  ([a-z][a-z-]*)(\s|$)`)
	flagLine    = regexp.MustCompile(`^\s+(--?[a-z][a-z0-9-]*)`)
)

// commands lists the commands of a help text's "Commands:" block.
func commands(text string) []string {
	var out []string
	seen := map[string]bool{}
	in := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "Commands:"):
			in = true
		case in && strings.TrimSpace(l) == "":
			in = false
		case in:
			if m := commandLine.FindStringSubmatch(l); m != nil && !seen[m[1]] {
				seen[m[1]] = true
				out = append(out, m[1])
			}
		}
	}
	return out
}

// flags lists the flags of a help text.
func flags(text string) []string {
	seen := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if m := flagLine.FindStringSubmatch(l); m != nil {
			f := m[1]
			if !strings.HasPrefix(f, "--") && len(f) > 2 {
				f = "-" + f // Go's flag package takes -name and --name alike
			}
			seen[f] = true
		}
	}
	out := make([]string, 0, len(seen))
	for f := range seen {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// roff escapes text for a .nf block.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			l = `\&` + l
		}
		l = strings.ReplaceAll(l, "-", `\-`)
		b.WriteString(l + "\n")
	}
	return b.String()
}

// environment is the man page's ENVIRONMENT: the variables a user may set
// (TestManEnvironment checks that every LINERATE_* variable the code reads
// is here or is one of its internal ones) and systemd's that linerate reads.
const environment = `.SH ENVIRONMENT
.TP
.B LINERATE_CONTROL
The control API's address for every command: where \fBrun\fR listens,
whatever the config's [control] listen says, and where \fBstatus\fR,
\fBreload\fR, \fBroute\fR, \fBstamp\fR and the other clients dial when no
\fB\-\-control\fR is given: unix:PATH or HOST:PORT.
.TP
.B LINERATE_KERNEL_DISABLE
Kernel features linerate is to take as missing, comma-separated, by the
names \fBlinerate doctor\fR gives them, or \fBall\fR: to try the fallbacks
(a stage that runs in Go instead of XDP) on a kernel that has the feature.
.TP
.B NOTIFY_SOCKET
Set by systemd (Type=notify): \fBrun\fR says READY=1, RELOADING=1 and
STOPPING=1 there, and logs as under \fB\-\-log\-format json\fR.
.TP
.B JOURNAL_STREAM
Set by systemd: when it names linerate's stderr, log lines carry the
journal's priority prefix.
.TP
.B XDG_RUNTIME_DIR
Where a user other than root gets the control socket, in place of
/run/linerate.
`

// exitStatus is the man page's EXIT STATUS: TestManExitStatus checks that
// every status the commands return is here.
const exitStatus = `.SH EXIT STATUS
.TP
.B 0
Success; \fB\-\-help\fR too.
.TP
.B 1
An error: a config that does not validate, a port or stage that fails to
start, a refused reload (so that systemctl reload fails), a control API
that does not answer.
.TP
.B 2
A usage error: an unknown command or flag, a missing or extra argument.
.TP
.B 130
Interrupted: \fBrun\fR given a second SIGINT or SIGTERM while it drains
exits without draining; \fBtest\fR stopped before the end writes its
report marked incomplete.
`

// node is a command and what completes after it.
type node struct {
	path  []string // the words after linerate
	help  string
	subs  []string // its commands, in the help's order
	flags []string
	verb  bool // its help is its parent's: no man page section of its own
}

// walk reads the help of linerate path... and of each command its
// "Commands:" block lists, to any depth. A word whose help is its parent's
// (route's list, get, add) is a verb of the parent's: completed, not walked.
func walk(bin string, path []string, parent string) ([]*node, error) {
	h, err := help(bin, append(append([]string(nil), path...), "--help")...)
	if err != nil {
		return nil, err
	}
	n := &node{path: path, help: h, flags: flags(h)}
	out := []*node{n}
	for _, s := range commands(h) {
		sub := append(append([]string(nil), path...), s)
		sh, err := help(bin, append(sub, "--help")...)
		if err != nil {
			continue // a word of the list that is not a command
		}
		n.subs = append(n.subs, s)
		if sh == h || sh == parent || len(sub) > 4 {
			out = append(out, &node{path: sub, help: sh, flags: n.flags, verb: true})
			continue
		}
		kids, err := walk(bin, sub, h)
		if err != nil {
			return nil, err
		}
		out = append(out, kids...)
	}
	return out, nil
}

func run(bin, out string) error {
	version, err := help(bin, "version")
	if err != nil {
		return err
	}
	top, err := walk(bin, nil, "")
	if err != nil {
		return err
	}
	if len(top[0].subs) == 0 {
		return fmt.Errorf("no commands in %s help", bin)
	}
	var man strings.Builder
	fmt.Fprintf(&man, ".TH LINERATE 1 \"\" %q \"User Commands\"\n", strings.TrimSpace(version))
	man.WriteString(".SH NAME\nlinerate \\- a high-rate packet appliance: IOAM, STAMP and RLNC on pinned lcores\n")
	man.WriteString(".SH SYNOPSIS\n.B linerate\n.I command\n[\\fIflags\\fR] [\\fIarguments\\fR]\n")
	man.WriteString(".SH DESCRIPTION\n.nf\n" + roff(top[0].help) + ".fi\n.SH COMMANDS\n")
	for _, n := range top[1:] {
		if n.verb {
			continue
		}
		fmt.Fprintf(&man, ".SS %s\n.nf\n%s.fi\n", strings.Join(n.path, " "), roff(n.help))
	}
	man.WriteString(environment + exitStatus)
	man.WriteString(".SH FILES\n.TP\n/etc/linerate/linerate.toml\nthe service's config (linerate.service)\n" +
		".TP\n/run/linerate/linerate.sock\nthe control API's socket\n" +
		".SH SEE ALSO\n/usr/share/doc/linerate/operations.md, /usr/share/doc/linerate/config.md\n")

	// The completion walks the words typed so far down the tree of
	// commands (flags and arguments are skipped) and offers the commands
	// and flags of the command reached.
	var sh strings.Builder
	sh.WriteString("# bash completion for linerate, generated from its help (packaging/mkdocs).\n")
	sh.WriteString("_linerate() {\n\tlocal cur=${COMP_WORDS[COMP_CWORD]} path=linerate w s i\n\tlocal -A subs flags\n")
	for _, n := range top {
		key := strings.Join(append([]string{"linerate"}, n.path...), " ")
		if len(n.subs) > 0 {
			fmt.Fprintf(&sh, "\tsubs[%q]=%q\n", key, strings.Join(n.subs, " "))
		}
		if len(n.flags) > 0 {
			fmt.Fprintf(&sh, "\tflags[%q]=%q\n", key, strings.Join(n.flags, " "))
		}
	}
	sh.WriteString(`	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		for s in ${subs[$path]}; do
			if [ "$s" = "$w" ]; then
				path="$path $w"
				break
			fi
		done
	done
	if [ "${COMP_WORDS[COMP_CWORD-1]}" = -c ]; then
		COMPREPLY=($(compgen -f -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -W "${subs[$path]} ${flags[$path]}" -- "$cur"))
}
complete -F _linerate linerate
`)

	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "linerate.1"), []byte(man.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "linerate.bash"), []byte(sh.String()), 0o644)
}
