package e2e

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readmeCommand is one command line of the README, with what the README
// shows it printing.
type readmeCommand struct {
	line   int      // in README.md
	args   []string // args[0] is the program
	output []string // the lines shown below it in a console block
}

// fails reports whether the README shows the command failing.
func (c readmeCommand) fails() bool {
	for _, l := range c.output {
		if strings.HasPrefix(l, "Error:") {
			return true
		}
	}
	return false
}

// readmePrograms are the programs whose command lines the README test runs;
// make, shell built-ins and the like are left out.
var readmePrograms = map[string]bool{"berth": true, "oras": true, "curl": true, "cosign": true, "helm": true}

// parseReadme returns the commands of the README's ```console blocks
// (lines starting with "$ ", followed by their output) and ```sh blocks
// (every line, "\" continuing one), and the files of its ```yaml blocks
// whose first line is a comment naming them ("# trust.yaml").
func parseReadme(path string) (cmds []readmeCommand, files map[string]string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	files = map[string]string{}
	var (
		lang     string // of the block we are in; "" outside blocks
		pending  string // a sh line continued with "\"
		yamlName string
		yamlBody strings.Builder
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if fence, ok := strings.CutPrefix(line, "```"); ok {
			if lang == "" {
				lang = cmp.Or(strings.TrimSpace(fence), "text")
				continue
			}
			if yamlName != "" {
				files[yamlName] = yamlBody.String()
			}
			lang, yamlName = "", ""
			yamlBody.Reset()
			continue
		}
		switch lang {
		case "console":
			if cmdLine, ok := strings.CutPrefix(line, "$ "); ok {
				args, err := splitWords(cmdLine)
				if err != nil {
					return nil, nil, fmt.Errorf("README.md:%d: %w", n, err)
				}
				cmds = append(cmds, readmeCommand{line: n, args: args})
			} else if len(cmds) > 0 && line != "" {
				cmds[len(cmds)-1].output = append(cmds[len(cmds)-1].output, line)
			}
		case "sh":
			if cont, ok := strings.CutSuffix(line, `\`); ok {
				pending += cont
				continue
			}
			line, pending = pending+line, ""
			args, err := splitWords(line)
			if err != nil {
				return nil, nil, fmt.Errorf("README.md:%d: %w", n, err)
			}
			if len(args) > 0 {
				cmds = append(cmds, readmeCommand{line: n, args: args})
			}
		case "yaml":
			if name, ok := strings.CutPrefix(line, "# "); ok && yamlName == "" && yamlBody.Len() == 0 {
				yamlName = name
				continue
			}
			yamlBody.WriteString(line + "\n")
		}
	}
	return cmds, files, sc.Err()
}

// splitWords splits a shell command line into words: single and double
// quotes and backslash escapes as sh has them, and a "#" that starts a word
// ends the line. Variables, globs and operators are not interpreted: the
// README's commands have none.
func splitWords(line string) ([]string, error) {
	var (
		words          []string
		word           strings.Builder
		inWord         bool
		single, double bool
	)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case single:
			if c == '\'' {
				single = false
			} else {
				word.WriteByte(c)
			}
		case double:
			switch {
			case c == '"':
				double = false
			case c == '\\' && i+1 < len(line) && strings.IndexByte(`"\$`+"`", line[i+1]) >= 0:
				i++
				word.WriteByte(line[i])
			default:
				word.WriteByte(c)
			}
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'':
			single, inWord = true, true
		case c == '"':
			double, inWord = true, true
		case c == '\\' && i+1 < len(line):
			i++
			word.WriteByte(line[i])
			inWord = true
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if single || double {
		return nil, fmt.Errorf("unterminated quote in %q", line)
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

// TestReadmeWalkthrough runs the command lines of README.md, in order,
// against a real berth serve, so that the README cannot drift from what
// berth does. The README's placeholders are mapped to the test's world:
// localhost:5000 to the server's port, operators/kafka and
// community-operators/etcd to the fixtures. berth serve itself is the
// server the test started. Every command must succeed, unless the README
// shows it failing; every output line the README shows without an
// ellipsis must be printed.
func TestReadmeWalkthrough(t *testing.T) {
	requireOras(t)
	requireTool(t, "the cosign CLI", cosignBin)
	requireTool(t, "the helm CLI", helmBin)
	curl, err := exec.LookPath("curl")
	if err != nil {
		requireTool(t, "curl", "")
	}
	cmds, files, err := parseReadme(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 20 {
		t.Fatalf("found %d commands in README.md; the parser no longer reads it", len(cmds))
	}

	s := startServer(t, "")
	_, port, _ := strings.Cut(s.addr, ":")
	work := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// localhost, not the server's 127.0.0.1: berth and oras use plain HTTP
	// for localhost unasked, which is what the README relies on.
	host := "localhost:" + port
	t.Setenv("BERTH_SERVER", host)
	t.Setenv("COSIGN_PASSWORD", "readme")
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv("BERTH_TRUST_POLICY", "")
	paths := map[string]string{
		"operators/kafka":          kudoFixture(t, "kafka", "2.5.1-1.3.2"),
		"community-operators/etcd": filepath.Join(fixtures, "olm-community", "etcd"),
	}
	bins := map[string]string{"berth": berthBin, "oras": orasBin, "cosign": cosignBin, "curl": curl, "helm": helmBin}

	ran := 0
	for _, c := range cmds {
		if !readmePrograms[c.args[0]] || c.args[0] == "berth" && len(c.args) > 1 && c.args[1] == "serve" {
			continue
		}
		args := make([]string, 0, len(c.args))
		for _, a := range c.args[1:] {
			if p, ok := paths[a]; ok {
				a = p
			}
			args = append(args, strings.ReplaceAll(a, "localhost:5000", host))
		}
		if c.args[0] == "curl" {
			args = append([]string{"--fail", "--show-error"}, args...) // an HTTP error status fails the command
		}
		name := fmt.Sprintf("README.md:%d: %s", c.line, strings.Join(c.args, " "))
		r := run(t, work, bins[c.args[0]], args...)
		ran++
		if failed := r.code != 0; failed != c.fails() {
			t.Fatalf("%s: exit %d, the README shows it %s\nstdout: %s\nstderr: %s",
				name, r.code, map[bool]string{true: "failing", false: "succeeding"}[c.fails()], r.stdout, r.stderr)
		}
		for _, want := range c.output {
			if strings.Contains(want, "…") {
				continue // elided in the README
			}
			want = strings.ReplaceAll(want, "localhost:5000", host)
			if !strings.Contains(r.stdout+r.stderr, want) {
				t.Errorf("%s: the README shows %q, berth printed:\n%s%s", name, want, r.stdout, r.stderr)
			}
		}
	}
	t.Logf("ran %d commands of README.md", ran)
}

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"berth search kafka", []string{"berth", "search", "kafka"}},
		{"berth pull r -o kafka/   # the files", []string{"berth", "pull", "r", "-o", "kafka/"}},
		{`curl -s 'localhost:5000/api/v1/packages?q=kafka#x'`, []string{"curl", "-s", "localhost:5000/api/v1/packages?q=kafka#x"}},
		{`echo "a \"b\" c" d\ e a#b`, []string{"echo", `a "b" c`, "d e", "a#b"}},
		{"# a comment", nil},
	} {
		got, err := splitWords(tc.line)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
	if _, err := splitWords(`echo 'open`); err == nil {
		t.Error("an unterminated quote is not an error")
	}
}
