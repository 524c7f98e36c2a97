package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sizingSource is where the per-stream memory and per-change CPU figures
// a pod is sized by are stated (from bench/README.md's measurements);
// every other document links there.
const sizingSource, sizingSection = "docs/operations.md", "### Scaling out"

// sizingFigure is a per-stream memory figure ("26 to 30 KiB per idle
// stream", "52 KiB of RSS per idle client stream") or a CPU cost per
// origin change ("0.13 to 0.33 CPU-seconds").
var sizingFigure = regexp.MustCompile(`\d[\d.]*(?:\s*(?:to|-|–)\s*\d[\d.]*)?\s*KiB(?:\s+of\s+RSS)?\s+per\s+(?:idle\s+)?(?:client\s+)?stream|\d[\d.]*(?:\s*(?:to|-|–)\s*\d[\d.]*)?\s*CPU[- ]s(?:econds?)?\b`)

// TestSizingFiguresOneSource: no document but the one source (and
// bench/, which holds the measurements) states sizing figures, so that
// two documents cannot give different ones (deploy/kubernetes/README.md
// once said 52 KiB and 0.3-0.5 CPU-s where docs/operations.md said 26-30
// KiB and 0.13-0.33).
func TestSizingFiguresOneSource(t *testing.T) {
	for _, f := range markdownFiles(t) {
		if strings.HasPrefix(f, "bench/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		allowed := [2]int{-1, -1}
		if f == sizingSource {
			start := strings.Index(text, "\n"+sizingSection+"\n")
			if start < 0 {
				t.Fatalf("%s has no section %q", f, sizingSection)
			}
			end := strings.Index(text[start+1:], "\n#")
			if end < 0 {
				end = len(text) - start - 1
			}
			allowed = [2]int{start, start + 1 + end}
		}
		found := 0
		for _, m := range sizingFigure.FindAllStringIndex(text, -1) {
			if m[0] > allowed[0] && m[1] <= allowed[1] {
				found++
				continue
			}
			line := strings.Count(text[:m[0]], "\n") + 1
			t.Errorf("%s:%d states a sizing figure (%q): state it only in %s, %q, and link there", f, line, text[m[0]:m[1]], sizingSource, sizingSection)
		}
		if f == sizingSource && found == 0 {
			t.Errorf("%s, %q states no sizing figure: it is their one source", f, sizingSection)
		}
	}
}

// sectionCitation is a section of a named file cited by its heading in
// prose: `README "Benchmarks"`, `docs/reliability.md, "Warm restart"`,
// `[config's README](../config/README.md), "Where a YAML section lives"`
// (the file: group 1, a link's target, or group 2, a name in the text;
// the heading: group 3).
var sectionCitation = regexp.MustCompile(`(?:\[[^\]]*\]\(([^)\s#]+\.md)\)|((?:[\w./-]+/)?(?:README|[\w-]+\.md)))\x60?,?\s"([^"]{1,80})"`)

// TestSectionCitationsExist: a section cited by its heading's text with
// its file named is a heading of that file (a Markdown link's anchor is
// checked by TestDocsLinks; a quoted name was not, and went stale when
// README sections moved).
func TestSectionCitationsExist(t *testing.T) {
	for _, f := range markdownFiles(t) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range sectionCitation.FindAllStringSubmatchIndex(string(data), -1) {
			cited := strings.Join(strings.Fields(string(data[m[6]:m[7]])), " ")
			var target string
			if m[2] >= 0 { // a link: relative to the citing file
				target = filepath.ToSlash(filepath.Join(filepath.Dir(f), string(data[m[2]:m[3]])))
			} else {
				target = citedFile(f, string(data[m[4]:m[5]]))
			}
			td, err := os.ReadFile(filepath.Join(root, target))
			if err != nil {
				continue // not a file of this repository: TestDocsLinks' business when linked
			}
			if !hasHeading(td, cited) {
				line := strings.Count(string(data[:m[0]]), "\n") + 1
				t.Errorf("%s:%d cites %s %q, which has no such heading", f, line, target, cited)
			}
		}
	}
}

// citedFile resolves a cited file name: README is the top-level README,
// a path is relative to the repository's root, or to the citing file's
// directory.
func citedFile(from, name string) string {
	if name == "README" {
		return "README.md"
	}
	if _, err := os.Stat(filepath.Join(root, name)); err == nil {
		return name
	}
	return filepath.ToSlash(filepath.Join(filepath.Dir(from), name))
}

// hasHeading: some heading of a Markdown file starts with text.
func hasHeading(data []byte, text string) bool {
	for _, l := range strings.Split(string(data), "\n") {
		if m := heading.FindStringSubmatch(l); m != nil && strings.HasPrefix(m[1], text) {
			return true
		}
	}
	return false
}
