// Package promexpr reads which series and labels a PromQL expression names,
// for the tests that hold the rule files and the dashboard under deploy/ to
// the metrics the service exports. It reads tokens, not a syntax tree:
// whether an expression parses is promtool's to say, so Read need only be
// right on expressions that do, and refuses what it cannot read for sure
// rather than guess.
package promexpr

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Refs is what one expression names.
type Refs struct {
	// Selectors are its series selectors, in the order they stand.
	Selectors []Selector
	// Grouping holds the labels of its by, without, on, ignoring,
	// group_left and group_right clauses.
	Grouping []string
	// Kept holds the labels of the by clauses of the aggregations at its
	// top level, outside every parenthesis: the labels its result keeps.
	// Nil when nothing aggregates there.
	Kept []string
	// Functions are the functions and aggregations it calls.
	Functions []string
}

// Selector is one series selector.
type Selector struct {
	// Names are the metric names it selects: its name, or each
	// alternative of a __name__=~"a|b" matcher.
	Names []string
	// Matchers are its label matchers, but for __name__.
	Matchers []Matcher
}

// Matcher is one label matcher of a selector.
type Matcher struct {
	Label string
	Op    string // =, !=, =~ or !~
	Value string // unquoted
}

type tokenKind int

const (
	tokIdent tokenKind = iota
	tokString
	tokNumber // a number or a duration
	tokOp     // an operator or punctuation
)

type token struct {
	kind tokenKind
	text string // a string's value, unquoted
	pos  int
}

// Keywords that are no metric name, in lower case: PromQL's are
// case-insensitive.
var (
	groupingWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	operatorWords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "atan2": true, "offset": true, "inf": true, "nan": true}
	aggregations  = map[string]bool{
		"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
		"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
	}
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
)

// Read returns what expr names, or an error where it cannot tell.
func Read(expr string) (Refs, error) {
	toks, err := lex(expr)
	if err != nil {
		return Refs{}, err
	}
	var refs Refs
	depth := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == tokIdent:
			word := strings.ToLower(t.text)
			next := punct(toks, i+1)
			switch {
			case groupingWords[word]:
				if next != "(" {
					if word == "group_left" || word == "group_right" {
						continue // no labels to copy
					}
					return Refs{}, fmt.Errorf("at %d: %s without a list of labels", t.pos, t.text)
				}
				labels, end, err := labelList(toks, i+2)
				if err != nil {
					return Refs{}, err
				}
				refs.Grouping = append(refs.Grouping, labels...)
				if word == "by" && depth == 0 {
					refs.Kept = append(refs.Kept, labels...)
				}
				i = end
			case operatorWords[word]:
			case aggregations[word] || next == "(":
				refs.Functions = append(refs.Functions, t.text)
			default:
				sel := Selector{Names: []string{t.text}}
				if next == "{" {
					if sel, i, err = matchers(toks, i+1, sel); err != nil {
						return Refs{}, err
					}
				}
				refs.Selectors = append(refs.Selectors, sel)
			}
		case t.kind == tokOp && t.text == "{":
			sel, end, err := matchers(toks, i, Selector{})
			if err != nil {
				return Refs{}, err
			}
			if len(sel.Names) == 0 {
				return Refs{}, fmt.Errorf("at %d: a selector with no metric name", t.pos)
			}
			refs.Selectors = append(refs.Selectors, sel)
			i = end
		case t.kind == tokOp && t.text == "(":
			depth++
		case t.kind == tokOp && t.text == ")":
			if depth--; depth < 0 {
				return Refs{}, fmt.Errorf("at %d: ) without its (", t.pos)
			}
		case t.kind == tokOp && t.text == "[":
			// A range or a subquery: durations, and a colon.
			for i++; i < len(toks) && toks[i].text != "]"; i++ {
				if toks[i].kind != tokNumber && toks[i].text != ":" {
					return Refs{}, fmt.Errorf("at %d: %q in a range", toks[i].pos, toks[i].text)
				}
			}
			if i == len(toks) {
				return Refs{}, fmt.Errorf("at %d: [ without its ]", t.pos)
			}
		case t.kind == tokOp && (t.text == "}" || t.text == "]"):
			return Refs{}, fmt.Errorf("at %d: %s without its opening", t.pos, t.text)
		}
	}
	if depth != 0 {
		return Refs{}, fmt.Errorf("( without its )")
	}
	return refs, nil
}

// punct returns the operator or punctuation at i, or "" where another
// kind of token stands, or none.
func punct(toks []token, i int) string {
	if i < len(toks) && toks[i].kind == tokOp {
		return toks[i].text
	}
	return ""
}

// labelList reads "a, b)" from i and returns the labels and the index of
// the closing parenthesis.
func labelList(toks []token, i int) ([]string, int, error) {
	var labels []string
	for ; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == tokOp && t.text == ")":
			return labels, i, nil
		case t.kind == tokOp && t.text == ",":
		case t.kind == tokIdent:
			labels = append(labels, t.text)
		default:
			return nil, 0, fmt.Errorf("at %d: %q in a list of labels", t.pos, t.text)
		}
	}
	return nil, 0, fmt.Errorf("a list of labels without its )")
}

// matchers reads the label matchers from the { at i into sel, and returns
// it with the index of the closing brace.
func matchers(toks []token, i int, sel Selector) (Selector, int, error) {
	open := toks[i].pos
	for i++; i < len(toks); i++ {
		t := toks[i]
		if t.kind == tokOp && t.text == "}" {
			return sel, i, nil
		}
		if t.kind == tokOp && t.text == "," {
			continue
		}
		if t.kind != tokIdent || i+2 >= len(toks) || toks[i+1].kind != tokOp || toks[i+2].kind != tokString {
			return Selector{}, 0, fmt.Errorf("at %d: want label, operator and quoted value", t.pos)
		}
		m := Matcher{Label: t.text, Op: toks[i+1].text, Value: toks[i+2].text}
		switch m.Op {
		case "=", "!=", "=~", "!~":
		default:
			return Selector{}, 0, fmt.Errorf("at %d: %q is no matcher", toks[i+1].pos, m.Op)
		}
		i += 2
		if m.Label != "__name__" {
			sel.Matchers = append(sel.Matchers, m)
			continue
		}
		names, err := nameMatcher(m)
		if err != nil {
			return Selector{}, 0, fmt.Errorf("at %d: %w", t.pos, err)
		}
		if len(sel.Names) > 0 {
			return Selector{}, 0, fmt.Errorf("at %d: a metric name twice", t.pos)
		}
		sel.Names = names
	}
	return Selector{}, 0, fmt.Errorf("at %d: { without its }", open)
}

// nameMatcher returns the metric names a __name__ matcher selects, when
// it lists them.
func nameMatcher(m Matcher) ([]string, error) {
	if m.Op == "=" || m.Op == "=~" {
		names := []string{m.Value}
		if m.Op == "=~" {
			names = strings.Split(m.Value, "|")
		}
		ok := true
		for _, n := range names {
			ok = ok && metricName.MatchString(n)
		}
		if ok {
			return names, nil
		}
	}
	return nil, fmt.Errorf("__name__%s%q: not a list of metric names", m.Op, m.Value)
}

// lex splits expr into tokens.
func lex(expr string) ([]token, error) {
	var toks []token
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#': // a comment, to the end of the line
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case isIdentStart(c):
			j := i + 1
			for j < len(expr) && (isIdentStart(expr[j]) || isDigit(expr[j])) {
				j++
			}
			toks = append(toks, token{tokIdent, expr[i:j], i})
			i = j
		case isDigit(c) || c == '.' && i+1 < len(expr) && isDigit(expr[i+1]):
			// A number (1, 1.5, 1e-3, 0x1f) or a duration (5m, 1h30m).
			j := i + 1
			for j < len(expr) {
				d := expr[j]
				if isDigit(d) || isIdentStart(d) || d == '.' {
					j++
				} else if (d == '+' || d == '-') && (expr[j-1] == 'e' || expr[j-1] == 'E') && !strings.HasPrefix(expr[i:], "0x") {
					j++
				} else {
					break
				}
			}
			toks = append(toks, token{tokNumber, expr[i:j], i})
			i = j
		case c == '"' || c == '\'' || c == '`':
			s, n, err := quoted(expr[i:])
			if err != nil {
				return nil, fmt.Errorf("at %d: %w", i, err)
			}
			toks = append(toks, token{tokString, s, i})
			i += n
		default:
			op := ""
			for _, o := range []string{"==", "!=", "=~", "!~", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "%", "^", "@", ",", ":", "(", ")", "{", "}", "[", "]"} {
				if strings.HasPrefix(expr[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("at %d: unexpected %q", i, c)
			}
			toks = append(toks, token{tokOp, op, i})
			i += len(op)
		}
	}
	return toks, nil
}

// quoted reads the string that s starts with and returns its value and
// its length in s.
func quoted(s string) (string, int, error) {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\\' && q != '`':
			i++
		case s[i] == q:
			if q == '`' {
				return s[1:i], i + 1, nil
			}
			body := s[1:i]
			if q == '\'' { // as Go reads a double-quoted one
				body = strings.ReplaceAll(strings.ReplaceAll(body, `\'`, `'`), `"`, `\"`)
			}
			v, err := strconv.Unquote(`"` + body + `"`)
			if err != nil {
				return "", 0, fmt.Errorf("string %s: %w", s[:i+1], err)
			}
			return v, i + 1, nil
		}
	}
	return "", 0, fmt.Errorf("string without its closing %c", q)
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
