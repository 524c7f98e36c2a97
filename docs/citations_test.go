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
// prose: `README "Quick start"`, `docs/reliability.md, "Warm restart"`,
// `README's "Quick start"`, `docs/protocol.md ("Served variants and
// types")`, `[config's README](../config/README.md), "Where a YAML section
// lives"` (the file: group 1, a link's target, or group 2, a name in the
// text; the heading: group 3).
var sectionCitation = regexp.MustCompile(`(?:\[[^\]]*\]\(([^)\s#]+\.md)\)|((?:[\w./-]+/)?(?:README|[\w-]+\.md)))\x60?(?:,|'s)?\s+\(?"([^"]{1,80})"`)

// TestSectionCitationsExist: a section cited by its heading's text with
// its file named is a heading of that file (a Markdown link's anchor is
// checked by TestDocsLinks; a quoted name was not, and went stale when
// README sections moved). Go comments' citations: TestGoCommentPointers.
func TestSectionCitationsExist(t *testing.T) {
	n := tally{}
	for _, p := range markdownProse(t) {
		checkSectionCitations(t, p, n)
	}
	n.require(t, "section")
}

// checkSectionCitations checks the section citations in p: a cited file of
// this repository has the cited heading.
func checkSectionCitations(t *testing.T, p prose, n tally) {
	t.Helper()
	for _, m := range sectionCitation.FindAllStringSubmatchIndex(p.text, -1) {
		cited := strings.Join(strings.Fields(p.text[m[6]:m[7]]), " ")
		var target string
		if m[2] >= 0 { // a link: relative to the citing file
			target = filepath.ToSlash(filepath.Join(filepath.Dir(p.file), p.text[m[2]:m[3]]))
		} else {
			target = citedFile(p, p.text[m[4]:m[5]])
		}
		td, err := os.ReadFile(filepath.Join(root, target))
		if err != nil {
			continue // not a file of this repository: TestDocsLinks' business when linked
		}
		n["section"]++
		if !hasHeading(td, cited) {
			t.Errorf("%s:%d cites %s %q, which has no such heading", p.file, p.line(m[0]), target, cited)
		}
	}
}

// citedFile resolves a file name cited in p: README is the top-level
// README (in a Go comment, README and README.md are the package's, if it
// has one), a path is relative to the repository's root, or to the citing
// file's directory.
func citedFile(p prose, name string) string {
	if strings.HasSuffix(p.file, ".go") && (name == "README" || name == "README.md") {
		own := filepath.ToSlash(filepath.Join(p.dir, "README.md"))
		if _, err := os.Stat(filepath.Join(root, own)); err == nil {
			return own
		}
	}
	if name == "README" {
		return "README.md"
	}
	if _, err := os.Stat(filepath.Join(root, name)); err == nil {
		return name
	}
	return filepath.ToSlash(filepath.Join(filepath.Dir(p.file), name))
}

// hasHeading: some heading of a Markdown file, or the bold title a
// paragraph starts with ("**Soak.** ..."), starts with text (backquotes
// aside).
func hasHeading(data []byte, text string) bool {
	text = strings.ReplaceAll(text, "`", "")
	for _, l := range strings.Split(string(data), "\n") {
		title, bold := strings.CutPrefix(l, "**")
		if m := heading.FindStringSubmatch(l); m != nil {
			title = m[1]
		} else if !bold {
			continue
		}
		if strings.HasPrefix(strings.ReplaceAll(title, "`", ""), text) {
			return true
		}
	}
	return false
}
