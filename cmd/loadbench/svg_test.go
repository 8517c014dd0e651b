package main

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestChartSVG(t *testing.T) {
	r := sampleResults()
	r.Machine.Model = `CPU <with> "odd" & name`
	svg := chartSVG(r, evaluate(r))

	// Well-formed XML with an svg root.
	dec := xml.NewDecoder(strings.NewReader(svg))
	root := ""
	var texts []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{
		"/orderbook full depth ÷ nginx static", // ratio panel, short labels
		"1.25×",
		"0.88×",
		"/trades limit=10&type=buy", // escaped in the file, text again once parsed
		"nginx memory",
		"100.0k",
		"/pairs, 50% of max: marketfeed",
		"3.00 ms",
		`CPU <with> "odd" & name`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("chart text lacks %q", want)
		}
	}
	// Misses are red, passes green.
	if !strings.Contains(svg, `fill="#d62728"`) || !strings.Contains(svg, `fill="#2ca02c"`) {
		t.Error("chart has no pass and miss colours")
	}
}

func TestChartSVGEmpty(t *testing.T) {
	r := &results{Routes: benchRoutes("BTC_USDT")}
	svg := chartSVG(r, evaluate(r))
	if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
		t.Fatalf("empty chart is not XML: %v", err)
	}
	if strings.Contains(svg, "<rect x=") {
		t.Error("an empty run drew bars")
	}
}
