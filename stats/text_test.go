package stats

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
)

func TestWriteTextEmpty(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, New(Options{}).Snapshot(5), TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(no reads yet)", "no prediction", "C cache rate", "not measured"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("empty summary lacks %q:\n%s", want, b.String())
		}
	}
}

func TestWriteTextScenario(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scenario(t, nil).Snapshot(3)
		s.WhatIf = WhatIf(WhatIfInput{DatasetBytes: 8000, CacheBytes: 4000, CacheRate: 1000, BackendRate: 100, ConsumerRate: 10_000})
		var b bytes.Buffer
		if err := WriteText(&b, s, TextOptions{Epochs: 2}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, want := range []string{
			"dataset        8 files, 7.8 KiB", "fetch stall", "(* epoch in progress)",
			"3.9 KiB  3.9 KiB  100.0%  4", "train/class1/img005.jpg",
			"stall-free cache: not reachable",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("summary lacks %q:\n%s", want, out)
			}
		}
		// TextOptions.Epochs keeps the last 2 of 3 rows.
		if strings.Contains(out, "\n1      ") || !strings.Contains(out, "\n3*") {
			t.Errorf("epoch rows not limited to the last 2:\n%s", out)
		}
	})
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteTextError(t *testing.T) {
	if err := WriteText(failWriter{}, New(Options{}).Snapshot(0), TextOptions{}); err == nil {
		t.Fatal("WriteText to a failing writer succeeded")
	}
}
