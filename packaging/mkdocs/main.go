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

func run(bin, out string) error {
	top, err := help(bin, "help")
	if err != nil {
		return err
	}
	version, err := help(bin, "version")
	if err != nil {
		return err
	}
	cmds := commands(top)
	if len(cmds) == 0 {
		return fmt.Errorf("no commands in %s help", bin)
	}
	var man strings.Builder
	fmt.Fprintf(&man, ".TH LINERATE 1 \"\" %q \"User Commands\"\n", strings.TrimSpace(version))
	man.WriteString(".SH NAME\nlinerate \\- a high-rate packet appliance: IOAM, STAMP and RLNC on pinned lcores\n")
	man.WriteString(".SH SYNOPSIS\n.B linerate\n.I command\n[\\fIflags\\fR] [\\fIarguments\\fR]\n")
	man.WriteString(".SH DESCRIPTION\n.nf\n" + roff(top) + ".fi\n.SH COMMANDS\n")
	comp := map[string][]string{}
	subs := map[string][]string{}
	for _, c := range cmds {
		h, err := help(bin, c, "--help")
		if err != nil {
			return err
		}
		fmt.Fprintf(&man, ".SS %s\n.nf\n%s.fi\n", c, roff(h))
		comp[c] = flags(h)
		for _, s := range commands(h) {
			sh, err := help(bin, c, s, "--help")
			if err != nil {
				continue // a word of the list that is not a command of its own
			}
			subs[c] = append(subs[c], s)
			fmt.Fprintf(&man, ".SS %s %s\n.nf\n%s.fi\n", c, s, roff(sh))
			comp[c+" "+s] = flags(sh)
		}
	}
	man.WriteString(".SH FILES\n.TP\n/etc/linerate/linerate.toml\nthe service's config (linerate.service)\n" +
		".TP\n/run/linerate/linerate.sock\nthe control API's socket\n" +
		".SH SEE ALSO\n/usr/share/doc/linerate/operations.md, /usr/share/doc/linerate/config.md\n")

	var sh strings.Builder
	sh.WriteString("# bash completion for linerate, generated from its help (packaging/mkdocs).\n")
	sh.WriteString("_linerate() {\n\tlocal cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]} sub=${COMP_WORDS[2]} words\n")
	fmt.Fprintf(&sh, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(cmds, " "))
	sh.WriteString("\tcase \"$cmd $sub\" in\n")
	keys := make([]string, 0, len(comp))
	for k := range comp {
		if strings.Contains(k, " ") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&sh, "\t%q) words=%q ;;\n", k, strings.Join(comp[k], " "))
	}
	sh.WriteString("\t*)\n\t\tcase \"$cmd\" in\n")
	for _, c := range cmds {
		w := comp[c]
		if len(subs[c]) > 0 {
			w = append(append([]string(nil), subs[c]...), w...)
		}
		fmt.Fprintf(&sh, "\t\t%s) words=%q ;;\n", c, strings.Join(w, " "))
	}
	sh.WriteString("\t\tesac ;;\n\tesac\n\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n\tif [ \"${COMP_WORDS[COMP_CWORD-1]}\" = -c ]; then\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\tfi\n}\ncomplete -F _linerate linerate\n")

	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "linerate.1"), []byte(man.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "linerate.bash"), []byte(sh.String()), 0o644)
}
