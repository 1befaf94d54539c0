package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"

	// The custom build's stage, for its README's examples.
	_ "github.com/linerate/linerate/docs/examples/custom/ipversion"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../../.."

// mdBlock is a fenced code block of a markdown file.
type mdBlock struct {
	file string // relative to the repository
	line int    // of the block's first line
	lang string
	text string
	// mark is what an HTML comment right above the block says to the doc
	// tests ("<!-- doctest: invalid -->" gives "invalid"), or "".
	mark string
}

var doctestMark = regexp.MustCompile(`^<!-- doctest: (.*) -->$`)

// mdBlocks reads every fenced block of every markdown file in the repository.
func mdBlocks(t *testing.T) []mdBlock {
	t.Helper()
	var out []mdBlock
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		lines := strings.Split(string(b), "\n")
		mark := ""
		for i := 0; i < len(lines); i++ {
			l := lines[i]
			if m := doctestMark.FindStringSubmatch(l); m != nil {
				mark = m[1]
				continue
			}
			lang, ok := strings.CutPrefix(l, "```")
			if !ok {
				if strings.TrimSpace(l) != "" {
					mark = ""
				}
				continue
			}
			blk := mdBlock{file: rel, line: i + 2, lang: strings.Fields(lang + " x")[0], mark: mark}
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			blk.text = strings.Join(body, "\n") + "\n"
			if blk.lang == "x" {
				blk.lang = ""
			}
			out = append(out, blk)
			mark = ""
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDocsTOML validates every TOML example in README.md, docs/ and every
// package README as `linerate validate` would, offline (keys, types, values,
// every stage built; nothing of this host checked). A stage or port table
// alone is put in a config around it; a block marked
// "<!-- doctest: continue -->" continues the file's previous TOML block; one
// marked "<!-- doctest: invalid -->" is a counter-example and must fail; one
// marked "<!-- doctest: not a config: WHY -->" is another TOML file (a key
// file, say). Blocks for the dpdk build are left to ports/dpdk's TestDocs.
func TestDocsTOML(t *testing.T) {
	host := docHost(t)
	checked := 0
	var prev *mdBlock
	for _, b := range mdBlocks(t) {
		if b.lang != "toml" {
			continue
		}
		where := fmt.Sprintf("%s:%d", b.file, b.line)
		text := b.text
		switch {
		case strings.HasPrefix(b.mark, "not a config:"):
			prev = nil
			continue
		case b.mark == "continue":
			if prev == nil || prev.file != b.file {
				t.Errorf("%s: marked continue, but no TOML block comes before it in %s", where, b.file)
				continue
			}
			text = prev.text + text
			b.text = text
		case b.mark != "" && b.mark != "invalid":
			t.Errorf("%s: unknown doctest mark %q", where, b.mark)
		}
		bb := b
		prev = &bb
		if strings.Contains(text, `driver = "dpdk"`) || strings.Contains(text, "[dpdk]") {
			continue
		}
		err := validateDoc(where, host.Replace(text))
		// A block that the next one continues need not stand alone.
		switch {
		case b.mark == "invalid" && err == nil:
			t.Errorf("%s: a counter-example that validates:\n%s", where, text)
		case b.mark != "invalid" && err != nil && !continued(b, t):
			t.Errorf("%s: %v\n%s", where, err, text)
		}
		checked++
	}
	if checked < 30 {
		t.Errorf("only %d TOML examples found", checked)
	}
}

// docHost makes in a temporary directory the files the docs tell a user to
// make (POT keys, with the command they give), and maps the docs' paths there.
func docHost(t *testing.T) *strings.Replacer {
	t.Helper()
	pot := filepath.Join(t.TempDir(), "pot")
	if out, err := exec.Command(linerateBin, "ioam", "pot-keys", "--nodes", "4", "--dir", pot).CombinedOutput(); err != nil {
		t.Fatalf("linerate ioam pot-keys: %v\n%s", err, out)
	}
	// The example plugins, where the READMEs install them.
	plugins := t.TempDir()
	for _, ex := range []string{"sampler", "mirror"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(plugins, "linerate-"+ex),
			filepath.Join(repoRoot, "plugins", "sdk", "examples", ex)).CombinedOutput(); err != nil {
			t.Fatalf("build linerate-%s: %v\n%s", ex, err, out)
		}
	}
	return strings.NewReplacer("/etc/linerate/pot/", pot+"/", "/usr/lib/linerate/plugins/", plugins+"/")
}

// continued reports whether the TOML block after b continues it.
func continued(b mdBlock, t *testing.T) bool {
	blocks := mdBlocks(t)
	for i, x := range blocks {
		if x.file == b.file && x.line == b.line {
			for _, y := range blocks[i+1:] {
				if y.file != b.file {
					return false
				}
				if y.lang == "toml" {
					return y.mark == "continue"
				}
			}
		}
	}
	return false
}

// validateDoc validates a documented config, or a stage or port table of one
// put in a config of its own.
func validateDoc(where, text string) error {
	if !regexp.MustCompile(`(?m)^version\s*=`).MatchString(text) {
		text = wrapFragment(text)
	}
	cfg, err := config.Parse(where, []byte(text))
	if err != nil {
		return err
	}
	e, err := appliance.New(cfg, appliance.Options{DryRun: true, Offline: true, Log: enginetest.Quiet})
	if err != nil {
		return err
	}
	return e.Close()
}

// wrapFragment makes a config of a stage or port table: version 1, a mem
// port for every port the fragment names, and a pipeline for its stage.
func wrapFragment(text string) string {
	var b strings.Builder
	b.WriteString("version = 1\n")
	trimmed := strings.TrimSpace(stripComments(text))
	isPort := strings.HasPrefix(trimmed, "[[ports]]")
	isPipeline := strings.HasPrefix(trimmed, "[[pipelines]]")
	var doc map[string]any
	body := text
	if !isPort && !isPipeline && !strings.HasPrefix(trimmed, "[[pipelines.stages]]") {
		// A stage's README table: its own tables ([[rules]]) are the
		// stage's, [[pipelines.stages.rules]] in a config file.
		body = "[[pipelines.stages]]\n" + subTable.ReplaceAllString(text, "[${1}pipelines.stages.")
	}
	_, _ = toml.Decode(body, &doc)
	declared := map[string]bool{}
	if isPort {
		for _, p := range asList(doc["ports"]) {
			if n, ok := p["name"].(string); ok {
				declared[n] = true
			}
		}
	}
	var names []string
	collectPorts(doc, &names)
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		if !declared[n] {
			fmt.Fprintf(&b, "[[ports]]\nname = %q\ndriver = \"mem\"\n", n)
		}
	}
	if isPort {
		b.WriteString(text)
		b.WriteString("\n[[pipelines]]\nname = \"doc\"\nlcores = [0]\n[[pipelines.stages]]\nkind = \"sink\"\n")
		return b.String()
	}
	if !isPipeline {
		b.WriteString("[[pipelines]]\nname = \"doc\"\nlcores = [0]\n")
	}
	b.WriteString(body)
	return b.String()
}

var subTable = regexp.MustCompile(`(?m)^\[(\[?)`)

// collectPorts gathers the port names a stage table refers to: the strings
// under keys that end in "port" or "ports".
func collectPorts(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if strings.HasSuffix(k, "port") || strings.HasSuffix(k, "ports") || k == "rx" {
				switch x := x.(type) {
				case string:
					*out = append(*out, x)
				case []any:
					for _, s := range x {
						if s, ok := s.(string); ok {
							*out = append(*out, s)
						}
					}
				}
			}
			collectPorts(x, out)
		}
	case []map[string]any:
		for _, x := range v {
			collectPorts(x, out)
		}
	case []any:
		for _, x := range v {
			collectPorts(x, out)
		}
	}
}

func asList(v any) []map[string]any {
	switch v := v.(type) {
	case []map[string]any:
		return v
	case []any:
		var out []map[string]any
		for _, x := range v {
			if m, ok := x.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// docStep is a command line a doc shows, with the output it shows after it.
type docStep struct {
	where string
	cmd   string
	want  []string
}

// docSteps reads the linerate command lines of the docs, file by file: the
// lines of ```sh blocks that start with "linerate ", and in any block the
// lines after "$ " with the output shown below them.
func docSteps(t *testing.T) map[string][]docStep {
	out := map[string][]docStep{}
	for _, b := range mdBlocks(t) {
		lines := strings.Split(strings.TrimRight(b.text, "\n"), "\n")
		for i := 0; i < len(lines); i++ {
			l := lines[i]
			where := fmt.Sprintf("%s:%d", b.file, b.line+i)
			switch {
			case strings.HasPrefix(l, "$ linerate "):
				s := docStep{where: where, cmd: strings.TrimPrefix(l, "$ ")}
				for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "$ ") {
					i++
					s.want = append(s.want, lines[i])
				}
				out[b.file] = append(out[b.file], s)
			case b.lang == "sh" && strings.HasPrefix(l, "linerate "):
				for strings.HasSuffix(l, `\`) && i+1 < len(lines) {
					i++
					l = strings.TrimSuffix(l, `\`) + " " + strings.TrimSpace(lines[i])
				}
				out[b.file] = append(out[b.file], docStep{where: where, cmd: l})
			}
		}
	}
	return out
}

// TestDocsCommands runs every linerate command line the docs show, as a user
// would type it, with a binary built from this tree: in a directory of its
// own, with LINERATE_CONTROL pointing at an appliance the test runs for the
// doc (the lab for docs/stamp.md; routing.md's router, on mem ports, for
// docs/routing.md). A command that runs until interrupted (run, stamp watch)
// gets SIGINT after a few seconds and must then exit cleanly. Where the doc
// shows output, one line must be what the command prints, a table's header
// must be its header, and an error must be the command's error.
func TestDocsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds linerate and runs the docs' commands")
	}
	bin := filepath.Dir(linerateBin)
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	steps := docSteps(t)
	files := make([]string, 0, len(steps))
	for f := range steps {
		files = append(files, f)
	}
	slices.Sort(files)
	ran := 0
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			dir := t.TempDir()
			// The docs name files of the repository by their paths from its top.
			if err := os.Symlink(filepath.Join(root, "docs"), filepath.Join(dir, "docs")); err != nil {
				t.Fatal(err)
			}
			sock := "unix:" + filepath.Join(dir, "ctl.sock")
			env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LINERATE_CONTROL="+sock)
			if cfg := docAppliance(t, file, root); cfg != "" {
				startAppliance(t, filepath.Join(bin, "linerate"), dir, env, cfg, sock)
			}
			host := strings.NewReplacer("unix:/run/linerate/linerate.sock", sock,
				"/etc/linerate/", filepath.Join(dir, "etc")+"/")
			// The package's config, /etc/linerate/linerate.toml, is the
			// inert service default.
			if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "etc", "linerate.toml"), config.Service(), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, s := range steps[file] {
				runStep(t, dir, env, s, host.Replace(s.cmd))
				ran++
			}
		})
	}
	if ran < 15 {
		t.Errorf("only %d command lines found in the docs", ran)
	}
}

// docAppliance is the config of the appliance a doc's commands talk to, or "".
func docAppliance(t *testing.T, file, root string) string {
	switch file {
	case "docs/stamp.md", "docs/config.md", "docs/operations.md":
		// operations.md's commands are shown against the lab example.
		return string(config.Lab())
	case "docs/routing.md":
		// The doc's router, with mem ports in place of its NICs and TAP (which
		// has no host side to readdress frames to), on whatever CPU there is.
		for _, b := range mdBlocks(t) {
			if b.file == file && b.lang == "toml" {
				cfg := regexp.MustCompile(`driver = "(afpacket|tap)"`).ReplaceAllString(b.text, `driver = "mem"`)
				cfg = regexp.MustCompile(`(?m)^interface = .*\n`).ReplaceAllString(cfg, "")
				cfg = regexp.MustCompile(`(?m)^cpus = \[.*\]`).ReplaceAllString(cfg, "cpus = [0]")
				cfg = strings.Replace(cfg, `port = "tap0"`, "port = \"tap0\"\nrewrite_mac = false", 1)
				return strings.Replace(cfg, "[engine]\n", "[engine]\npin = false\n", 1)
			}
		}
		t.Fatalf("%s has no config", file)
	}
	return ""
}

// startAppliance runs linerate with cfg until the test ends, once its control
// socket answers.
func startAppliance(t *testing.T, bin, dir string, env []string, cfg, sock string) {
	t.Helper()
	path := filepath.Join(dir, "appliance.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-c", path, "--live=false")
	cmd.Dir, cmd.Env = dir, env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("the appliance exited with %v:\n%s", err, out.String())
			}
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			t.Errorf("the appliance did not stop on SIGINT:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		st := exec.Command(bin, "status")
		st.Env = env
		if st.Run() == nil {
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("the appliance exited: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the appliance's control API did not answer on %s within a minute:\n%s", sock, out.String())
		}
	}
}

// runStep runs one documented command line through the shell and holds it to
// what the doc shows.
func runStep(t *testing.T, dir string, env []string, s docStep, line string) {
	t.Helper()
	// What runs until interrupted gets a few seconds, then ^C: the shell
	// execs it, so the signal reaches linerate itself.
	endless := (strings.Contains(line, "linerate run") && !strings.Contains(line, "--duration")) ||
		strings.Contains(line, "stamp watch")
	sh := line
	if endless {
		sh = "exec " + line
	}
	cmd := exec.Command("sh", "-c", sh)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	if endless {
		select {
		case err = <-done:
		case <-time.After(3 * time.Second):
			_ = cmd.Process.Signal(syscall.SIGINT)
			err = <-done
		}
	} else {
		select {
		case err = <-done:
		case <-time.After(2 * time.Minute):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			t.Errorf("%s: %s did not end within 2 minutes", s.where, line)
			return
		}
	}
	wantErr := len(s.want) > 0 && strings.HasPrefix(s.want[0], "linerate")
	got := strings.TrimRight(stdout.String(), "\n")
	if wantErr {
		got = strings.TrimRight(stderr.String(), "\n")
	}
	switch {
	case wantErr && err == nil:
		t.Errorf("%s: %s succeeded; the doc shows an error:\n%s", s.where, line, s.want[0])
	case !wantErr && err != nil:
		t.Errorf("%s: %s: %v\nstdout:\n%s\nstderr:\n%s", s.where, line, err, stdout.String(), stderr.String())
	case len(s.want) == 0:
	default:
		// The first line shown: whole, or up to an ellipsis; of a table,
		// the column names (their widths follow the rows).
		first, _, _ := strings.Cut(got, "\n")
		want := s.want[0]
		if len(s.want) > 1 && !wantErr {
			if !slices.Equal(strings.Fields(first), strings.Fields(want)) {
				t.Errorf("%s: %s printed the header\n%s\nthe doc shows\n%s", s.where, line, first, want)
			}
		} else if prefix, ok := strings.CutSuffix(want, "…"); ok {
			if !strings.HasPrefix(first, prefix) {
				t.Errorf("%s: %s printed\n%s\nthe doc shows\n%s", s.where, line, first, want)
			}
		} else if first != want {
			t.Errorf("%s: %s printed\n%s\nthe doc shows\n%s", s.where, line, first, want)
		}
	}
}

// TestDocsCodeWidth: every line of every fenced block of README.md, docs/
// and the package READMEs fits 100 columns (a tab to the next multiple of
// 8), as the CLI's output does (appliance/cli's checkWidth): a reader copies
// them from a terminal.
func TestDocsCodeWidth(t *testing.T) {
	n := 0
	for _, b := range mdBlocks(t) {
		for i, l := range strings.Split(strings.TrimSuffix(b.text, "\n"), "\n") {
			if w := columns(l); w > 100 {
				t.Errorf("%s:%d: %d columns: %s", b.file, b.line+i, w, l)
			}
		}
		n++
	}
	if n < 100 {
		t.Errorf("only %d code blocks in the docs", n)
	}
}

// columns is how wide l is on a terminal: a rune a column, a tab to the
// next multiple of 8.
func columns(l string) int {
	w := 0
	for _, r := range l {
		if r == '\t' {
			w += 8 - w%8
		} else {
			w++
		}
	}
	return w
}

// TestReloadAsDocumented: what docs/operations.md and the unit say a reload
// does is what the engine does. On the lab, a reload takes a link's new
// delay; it refuses a STAMP sender's new session table and a new
// [[routes]] table, which change through linerate stamp and linerate route.
func TestReloadAsDocumented(t *testing.T) {
	lab := string(config.Lab())
	e := enginetest.Start(t, lab, appliance.Options{})
	check := func(what, toml string) error {
		t.Helper()
		cfg, err := config.Parse("lab.toml", []byte(toml))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		_, err = e.CheckReload(cfg)
		return err
	}
	edit := func(old, new string) string {
		t.Helper()
		if !strings.Contains(lab, old) {
			t.Fatalf("the lab has no %q", old)
		}
		return strings.Replace(lab, old, new, 1)
	}
	if err := check("link delay", edit(`delay = "1ms"`, `delay = "2ms"`)); err != nil {
		t.Errorf("a link's new delay is refused: %v", err)
	}
	if err := check("STAMP session", edit(`interval = "1ms"`, `interval = "2ms"`)); err == nil {
		t.Error("a STAMP sender's new session table is taken by a reload")
	}
	routes := lab + "\n[[routes]]\nprefix = \"2001:db8:99::/48\"\nport = \"m0\"\n"
	if err := check("routes", routes); err == nil {
		t.Error("a new [[routes]] table is taken by a reload")
	}
	ops, err := os.ReadFile(filepath.Join(repoRoot, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(filepath.Join(repoRoot, "packaging/linerate.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"`[[routes]]`", "STAMP sessions", "`linerate route`", "`linerate stamp`", "all or nothing"} {
		if !strings.Contains(strings.Join(strings.Fields(string(ops)), " "), want) {
			t.Errorf("docs/operations.md does not say what a reload does with %s", want)
		}
	}
	for _, claim := range []string{"routes, tables, sessions", "(routes", "sessions)"} {
		if strings.Contains(string(unit), claim) {
			t.Errorf("linerate.service says a reload changes %q", claim)
		}
	}
}
