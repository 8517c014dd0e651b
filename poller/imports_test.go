package poller

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The import graph is the architecture (docs/development.md, Layout): each package of
// ours may import only the packages of ours listed here, besides the
// shared helpers under internal/. A package missing from the table fails
// too, so a new one states its place.
var allowedImports = map[string][]string{
	"marketfeed/snapshot":     {},
	"marketfeed/server":       {"marketfeed/snapshot"},
	"marketfeed/server/pages": {},
	"marketfeed/cluster":      {"marketfeed/snapshot"},
	"marketfeed/poller/venue": {"marketfeed/snapshot"},
	// What the tests of several packages share of venue: imported by
	// tests only.
	"marketfeed/poller/venue/venuetest": {"marketfeed/poller/venue", "marketfeed/snapshot"},
	"marketfeed/poller/binance":         {"marketfeed/poller/venue", "marketfeed/snapshot"},
	"marketfeed/poller/sim":             {"marketfeed/poller/venue", "marketfeed/snapshot"},
	"marketfeed/poller/orderbook":       {"marketfeed/poller/venue", "marketfeed/snapshot"},
	"marketfeed/poller/budget":          {"marketfeed/poller/venue"},
	"marketfeed/poller/standby":         {"marketfeed/poller/venue", "marketfeed/snapshot"},
	"marketfeed/poller/live": {"marketfeed/poller/venue", "marketfeed/poller/orderbook",
		"marketfeed/poller/budget", "marketfeed/snapshot"},
	"marketfeed/poller": {"marketfeed/poller/venue", "marketfeed/poller/orderbook",
		"marketfeed/poller/budget", "marketfeed/poller/live", "marketfeed/snapshot"},
	// The system tests' harness: it runs the binaries and reads them over
	// HTTP, so it needs no package of ours but the internal helpers.
	"marketfeed/apptest": {},
	"marketfeed/role": {"marketfeed/snapshot", "marketfeed/poller", "marketfeed/poller/live",
		"marketfeed/poller/standby", "marketfeed/poller/venue", "marketfeed/cluster"},
}

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "marketfeed/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if strings.HasPrefix(pkg, "marketfeed/cmd/") {
			continue // commands wire everything
		}
		internal := strings.HasPrefix(pkg, "marketfeed/internal/")
		allowed, listed := allowedImports[pkg]
		if !listed && !internal {
			t.Errorf("%s has no row in the import rules", pkg)
			continue
		}
		for _, imp := range imports {
			if !strings.HasPrefix(imp, "marketfeed/") {
				continue // the standard library and the chosen dependencies
			}
			switch {
			case internal && strings.HasPrefix(imp, "marketfeed/internal/"):
				t.Errorf("%s imports %s: internal helpers stand alone", pkg, imp)
			case internal:
				t.Errorf("%s imports %s: internal helpers import nothing of ours", pkg, imp)
			case strings.HasPrefix(imp, "marketfeed/internal/"):
			case !slices.Contains(allowed, imp):
				t.Errorf("%s imports %s, which the layout does not allow", pkg, imp)
			}
		}
	}
}
