package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The documentation is read from the repository's root, two levels up.
const repoRoot = "../.."

// flagsPage is the page the README points to for every flag.
const flagsPage = "docs/configuration.md"

// readDoc returns the text of a file under the repository's root.
func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docPages lists every Markdown page under docs/, as paths from the root:
// a page added later is found without a change here.
func docPages(t *testing.T) []string {
	t.Helper()
	var pages []string
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(repoRoot, path)
			pages = append(pages, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no page under docs/")
	}
	return pages
}

// mdLink is a Markdown link's target, without its text.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// links returns the targets of the links in a Markdown text.
func links(text string) []string {
	var out []string
	for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// A newcomer finds every page from the README: each page under docs/ is
// linked from it.
func TestReadmeLinksEveryDocsPage(t *testing.T) {
	linked := map[string]bool{}
	for _, l := range links(readDoc(t, "README.md")) {
		file, _, _ := strings.Cut(l, "#")
		linked[filepath.ToSlash(filepath.Clean(file))] = true
	}
	for _, page := range docPages(t) {
		if !linked[page] {
			t.Errorf("README.md does not link %s", page)
		}
	}
}

// Every flag -h prints is explained where the README says flags are: in
// the README itself or the page it points to for every flag.
func TestEveryFlagIsDocumented(t *testing.T) {
	var help strings.Builder
	if _, err := parseConfig([]string{"-h"}, nil, &help); err == nil {
		t.Fatal("-h did not stop")
	}
	readme := readDoc(t, "README.md")
	if !slices.Contains(links(readme), flagsPage) {
		t.Fatalf("README.md does not point to %s for the flags", flagsPage)
	}
	docs := readme + readDoc(t, flagsPage)
	flagLine := regexp.MustCompile(`(?m)^  (-[a-z0-9-]+)`)
	flags := flagLine.FindAllStringSubmatch(help.String(), -1)
	if len(flags) < 20 {
		t.Fatalf("-h printed %d flags:\n%s", len(flags), help.String())
	}
	for _, f := range flags {
		// The flag as a word: -rate-limit is not documented by -rate-limit-exempt.
		if !regexp.MustCompile(`(^|[^a-z0-9-])` + regexp.QuoteMeta(f[1]) + `($|[^a-z0-9-])`).MatchString(docs) {
			t.Errorf("%s is in -h but neither in README.md nor in %s", f[1], flagsPage)
		}
	}
}

// Every link between the README and the pages under docs/ leads somewhere:
// the file exists and, for a link to a heading, the heading does. Pages
// were moved out of the README, and a link to a section that moved would
// otherwise fail only in a reader's browser.
func TestDocLinksResolve(t *testing.T) {
	for _, page := range append([]string{"README.md"}, docPages(t)...) {
		for _, l := range links(readDoc(t, page)) {
			if strings.Contains(l, "://") || strings.HasPrefix(l, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(l, "#")
			target := page
			if file != "" {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
			}
			if _, err := os.Stat(filepath.Join(repoRoot, target)); err != nil {
				t.Errorf("%s links %s: no such file", page, l)
				continue
			}
			if anchor != "" && !slices.Contains(headingAnchors(readDoc(t, target)), anchor) {
				t.Errorf("%s links %s: %s has no such heading", page, l, target)
			}
		}
	}
}

// headingAnchors returns the anchors a Markdown renderer gives the headings
// of text: lower case, spaces as dashes, punctuation dropped.
func headingAnchors(text string) []string {
	var out []string
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f:
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// The README's first screen says what the service is, how to run it, how to
// use a real venue, how to try that path offline (venuesim and -venue-url)
// and where everything else is.
func TestReadmeFirstScreen(t *testing.T) {
	readme := readDoc(t, "README.md")
	lines := strings.Split(readme, "\n")
	first := strings.Join(lines[:min(60, len(lines))], "\n")
	for _, want := range []string{"## Quick start", "make run", "## Use a real venue", "-venue binance", "bin/venuesim", "-venue-url http://127.0.0.1:8500", "## Documentation", "docs/configuration.md"} {
		if !strings.Contains(first, want) {
			t.Errorf("the README's first 60 lines do not have %q", want)
		}
	}
}

// The operator listener has a port of its own. On Prometheus's port (9090)
// a Prometheus started first on the same host scraped itself as
// marketfeed, so the process's "down" alert could never fire. The default
// stays out of the Prometheus project's default port allocations (9090–9094
// for its own components, 9100–9999 for exporters), the example scrape
// configuration follows it, and nothing an operator reads names 9090 but the
// README's note for those upgrading.
func TestOpsListenerHasAPortOfItsOwn(t *testing.T) {
	cfg, err := parseConfig(nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, portText, err := net.SplitHostPort(cfg.opsListen)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		t.Fatal(err)
	}
	if (port >= 9090 && port <= 9094) || (port >= 9100 && port <= 9999) {
		t.Errorf("-ops-listen defaults to %s, a port the Prometheus project allocates", cfg.opsListen)
	}
	if !strings.Contains(readDoc(t, "deploy/prometheus/prometheus.yml"), `"`+cfg.opsListen+`"`) {
		t.Errorf("deploy/prometheus/prometheus.yml does not scrape the default %s", cfg.opsListen)
	}
	files := append(docPages(t), "README.md", "docs/openapi-ops.yaml", "deploy/prometheus/prometheus.yml",
		"scripts/cluster.sh", "scripts/clusterbench.sh", "Makefile")
	for _, dir := range []string{"deploy/prometheus/tests", "deploy/grafana"} {
		entries, err := os.ReadDir(filepath.Join(repoRoot, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			files = append(files, dir+"/"+e.Name())
		}
	}
	oldPort := regexp.MustCompile(`:909[0-4]\b`)
	for _, f := range files {
		for i, line := range strings.Split(readDoc(t, f), "\n") {
			if oldPort.MatchString(line) && !(f == "README.md" && strings.Contains(line, "default was")) {
				t.Errorf("%s:%d names a Prometheus port: %s", f, i+1, line)
			}
		}
	}
	if !strings.Contains(readDoc(t, "README.md"), "default was `127.0.0.1:9090`") {
		t.Error("the README's configuration section does not name the old port for those upgrading")
	}
}

// Every paragraph of the README's prose ends a sentence: a line lost in an
// edit left two cut off in the middle ("with exactly its name", "or a
// confirmed copy of it,"). Code blocks, tables, lists, headings, quotes and
// the line of section links are not prose.
func TestReadmeParagraphsEnd(t *testing.T) {
	lines := strings.Split(readDoc(t, "README.md"), "\n")
	fence := false
	var last string // the last line of the paragraph being read
	lastAt := 0
	end := func() {
		if last != "" && !strings.HasSuffix(last, "·") && !strings.ContainsAny(last[len(last)-1:], ".:?!") {
			t.Errorf("README.md:%d: a paragraph ends in mid-sentence: %q", lastAt, last)
		}
		last = ""
	}
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			end()
			fence = !fence
		case fence:
		case trimmed == "", strings.HasPrefix(trimmed, "#"), strings.HasPrefix(trimmed, "|"),
			strings.HasPrefix(trimmed, ">"), strings.HasPrefix(trimmed, "- "), strings.HasPrefix(trimmed, "* "):
			end()
		case strings.HasPrefix(trimmed, "[") && strings.Contains(trimmed, "](#"):
			last = "" // the line of section links
		default:
			last, lastAt = trimmed, i+1
		}
	}
	end()
}

// make cluster runs its members on a real venue's path (venuesim), which
// has no built-in spot list: without -spot every member's /tickers is [].
func TestMakeClusterGivesSpotPairs(t *testing.T) {
	script := strings.ReplaceAll(readDoc(t, "scripts/cluster.sh"), "\\\n", " ")
	found := 0
	for _, line := range strings.Split(script, "\n") {
		if !strings.Contains(line, `"$BIN"/marketfeed `) {
			continue
		}
		found++
		if !regexp.MustCompile(`\s-spot(-file)?\s`).MatchString(line) {
			t.Errorf("scripts/cluster.sh starts a member with no spot pairs: %s", strings.Join(strings.Fields(line), " "))
		}
	}
	if found == 0 {
		t.Fatal("scripts/cluster.sh starts no marketfeed")
	}
}
