package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// benchLine is one Go benchmark result run with -benchmem.
type benchLine struct {
	Name        string // without the -GOMAXPROCS suffix
	NsPerOp     float64
	BytesPerOp  int64
	AllocsPerOp int64
}

// parseGoBench reads `go test -bench -benchmem` output. Lines that are not
// benchmark results (goos:, PASS, ok ...) are skipped; a result without
// B/op and allocs/op is an error, since allocations are what is checked.
func parseGoBench(out string) ([]benchLine, error) {
	var lines []benchLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue // a benchmark's own log line, not a result
		}
		b := benchLine{Name: trimProcs(f[0]), BytesPerOp: -1, AllocsPerOp: -1}
		// After the iteration count come value-unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			v, unit := f[i], f[i+1]
			var err error
			switch unit {
			case "ns/op":
				b.NsPerOp, err = strconv.ParseFloat(v, 64)
			case "B/op":
				b.BytesPerOp, err = strconv.ParseInt(v, 10, 64)
			case "allocs/op":
				b.AllocsPerOp, err = strconv.ParseInt(v, 10, 64)
			}
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: %w", sc.Text(), err)
			}
		}
		if b.AllocsPerOp < 0 || b.BytesPerOp < 0 {
			return nil, fmt.Errorf("benchmark line %q: no B/op and allocs/op (run with -benchmem)", sc.Text())
		}
		lines = append(lines, b)
	}
	return lines, sc.Err()
}

// trimProcs drops the -N suffix go test appends for GOMAXPROCS.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}
