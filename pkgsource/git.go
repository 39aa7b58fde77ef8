package pkgsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
)

// go-git chooses its http transport per URL scheme, for the whole process.
// pkgsource installs one whose client sends each request through the
// session of the fetch that made it (found in the request's context), so
// that every fetch has its own limits and connections.
var installGit sync.Once

type sessionKey struct{}

type sessionDispatch struct{}

func (sessionDispatch) RoundTrip(req *http.Request) (*http.Response, error) {
	s, ok := req.Context().Value(sessionKey{}).(*session)
	if !ok {
		return nil, errors.New("pkgsource: a git request outside a fetch")
	}
	return s.RoundTrip(req)
}

func gitContext(ctx context.Context, src string, l Limits) (context.Context, *session) {
	installGit.Do(func() {
		c := githttp.NewClient(&http.Client{Transport: sessionDispatch{}, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			s, ok := req.Context().Value(sessionKey{}).(*session)
			if !ok {
				return errors.New("pkgsource: a git request outside a fetch")
			}
			return s.checkRedirect(req, via)
		}})
		client.InstallProtocol("http", c)
		client.InstallProtocol("https", c)
	})
	s := newSession(src, l)
	return context.WithValue(ctx, sessionKey{}, s), s
}

var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// lfsPointer starts the text of a git LFS pointer file.
var lfsPointer = []byte("version https://git-lfs.github.com/spec/v1")

func gitAuth(s Spec) *githttp.BasicAuth {
	if s.Credentials == (Credentials{}) {
		return nil
	}
	return &githttp.BasicAuth{Username: s.Credentials.Username, Password: s.Credentials.Password}
}

func checkGitURL(src, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%s: not an http(s) URL (only smart HTTP is supported): %w", src, ErrInvalid)
	}
	return nil
}

// lsRemote lists the remote's refs and finds s.Ref: the ref name and the
// commit it points at (peeled, for an annotated tag).
func lsRemote(ctx context.Context, s Spec, src string) (plumbing.ReferenceName, plumbing.Hash, error) {
	if commitPattern.MatchString(s.Ref) {
		return plumbing.ReferenceName(s.Ref), plumbing.NewHash(s.Ref), nil
	}
	byName, err := listRefs(ctx, s, src)
	if err != nil {
		return "", plumbing.ZeroHash, err
	}
	var candidates []plumbing.ReferenceName
	switch {
	case s.Ref == "":
		candidates = []plumbing.ReferenceName{plumbing.HEAD}
	case strings.HasPrefix(s.Ref, "refs/"):
		candidates = []plumbing.ReferenceName{plumbing.ReferenceName(s.Ref)}
	default:
		candidates = []plumbing.ReferenceName{plumbing.NewBranchReferenceName(s.Ref), plumbing.NewTagReferenceName(s.Ref)}
	}
	for _, name := range candidates {
		ref, ok := byName[name]
		if !ok {
			continue
		}
		if ref.Type() == plumbing.SymbolicReference {
			if ref, ok = byName[ref.Target()]; !ok {
				continue
			}
			name = ref.Name()
		}
		hash := ref.Hash()
		if peeled, ok := byName[name+"^{}"]; ok {
			hash = peeled.Hash()
		}
		return name, hash, nil
	}
	return "", plumbing.ZeroHash, fmt.Errorf("%s: no branch or tag %q (and not a full commit hash): %w", src, s.Ref, ErrInvalid)
}

// listRefs lists the remote's refs by name, with the peeled ones
// (<tag>^{}) of annotated tags.
func listRefs(ctx context.Context, s Spec, src string) (map[plumbing.ReferenceName]*plumbing.Reference, error) {
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{s.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: gitAuth(s), PeelingOption: git.AppendPeeled})
	if err != nil {
		return nil, gitError(src, err)
	}
	byName := make(map[plumbing.ReferenceName]*plumbing.Reference, len(refs))
	for _, r := range refs {
		byName[r.Name()] = r
	}
	return byName, nil
}

func resolveGit(ctx context.Context, s Spec, l Limits) (Resolved, error) {
	src := s.name()
	if err := checkGitURL(src, s.URL); err != nil {
		return Resolved{}, err
	}
	ctx, sess := gitContext(ctx, src, l)
	defer sess.close()
	name, hash, err := lsRemote(ctx, s, src)
	if err != nil {
		return Resolved{}, err
	}
	return Resolved{Kind: Git, URL: s.URL, Ref: string(name), Revision: hash.String(), Dir: s.Dir}, nil
}

// fetchGit fetches the commit of s.Ref at depth 1 into a temporary
// directory and writes
// the files of its Dir into t.
func fetchGit(ctx context.Context, s Spec, t *tree) (Resolved, error) {
	dir, err := cleanDir(t.src, "dir", s.Dir)
	if err != nil {
		return Resolved{}, err
	}
	if err := checkGitURL(t.src, s.URL); err != nil {
		return Resolved{}, err
	}
	ctx, sess := gitContext(ctx, t.src, t.l)
	defer sess.close()
	name, hash, err := lsRemote(ctx, s, t.src)
	if err != nil {
		return Resolved{}, err
	}
	// The objects go to disk as the packfile the server sent, not into
	// memory: a blob is inflated only when written, after its size was
	// checked against what MaxBytes has left, so a pack that inflates
	// a thousandfold cannot exhaust memory.
	objects, err := os.MkdirTemp("", "pkgsource-git-")
	if err != nil {
		return Resolved{}, err
	}
	defer os.RemoveAll(objects)
	repo, err := git.Init(filesystem.NewStorage(osfs.New(objects), cache.NewObjectLRUDefault()), nil)
	if err != nil {
		return Resolved{}, err
	}
	remote, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{s.URL}})
	if err != nil {
		return Resolved{}, err
	}
	spec := config.RefSpec(fmt.Sprintf("+%s:refs/pkgsource/fetched", name))
	if commitPattern.MatchString(s.Ref) {
		spec = config.RefSpec(fmt.Sprintf("%s:refs/pkgsource/fetched", hash))
	}
	err = remote.FetchContext(ctx, &git.FetchOptions{RefSpecs: []config.RefSpec{spec}, Depth: 1, Auth: gitAuth(s), Tags: git.NoTags})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		if cause := context.Cause(ctx); cause != nil {
			return Resolved{}, cause
		}
		if commitPattern.MatchString(s.Ref) {
			return Resolved{}, fmt.Errorf("%s: fetching commit %s: %v (the server may not allow fetching a commit that no branch or tag points at; name a branch or a tag instead): %w",
				t.src, s.Ref, err, ErrInvalid)
		}
		return Resolved{}, gitError(t.src, err)
	}
	commit, err := repo.CommitObject(hash)
	if err != nil {
		return Resolved{}, fmt.Errorf("%s: commit %s: %w", t.src, hash, err)
	}
	root, err := commit.Tree()
	if err != nil {
		return Resolved{}, fmt.Errorf("%s: commit %s: %w", t.src, hash, err)
	}
	if dir != "" {
		if root, err = root.Tree(dir); err != nil {
			return Resolved{}, fmt.Errorf("%s: no directory %s at commit %s: %w", t.src, dir, hash, ErrInvalid)
		}
	}
	if err := writeGitTree(t, repo, root); err != nil {
		return Resolved{}, err
	}
	return Resolved{Kind: Git, URL: s.URL, Ref: string(name), Revision: hash.String(), Dir: s.Dir}, nil
}

// writeGitTree writes the files of a git tree into t. A submodule (a
// gitlink) is refused: its content is another repository's, which is not
// fetched. So is a git LFS pointer, whose content would be wrong.
func writeGitTree(t *tree, repo *git.Repository, root *object.Tree) error {
	walker := object.NewTreeWalker(root, true, nil)
	defer walker.Close()
	for {
		name, entry, err := walker.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", t.src, err)
		}
		switch entry.Mode {
		case filemode.Dir:
			continue
		case filemode.Submodule:
			return fmt.Errorf("%s: %s is a submodule, which is not fetched: vendor its files or point Dir elsewhere: %w", t.src, name, ErrInvalid)
		}
		b, err := repo.BlobObject(entry.Hash)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", t.src, name, err)
		}
		if b.Size > t.l.MaxBytes-t.bytes {
			return fmt.Errorf("%s: more than %d bytes unpacked (at %s): %w", t.src, t.l.MaxBytes, name, ErrLimit)
		}
		r, err := b.Reader()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", t.src, name, err)
		}
		head := make([]byte, len(lfsPointer))
		n, _ := io.ReadFull(r, head)
		head = head[:n]
		if b.Size < 1024 && bytes.Equal(head, lfsPointer) {
			r.Close()
			return fmt.Errorf("%s: %s is a git LFS pointer, and LFS content is not fetched: commit the file itself: %w", t.src, name, ErrInvalid)
		}
		content := io.MultiReader(bytes.NewReader(head), r)
		if entry.Mode == filemode.Symlink {
			target, err := io.ReadAll(io.LimitReader(content, 4096))
			r.Close()
			if err != nil {
				return fmt.Errorf("%s: %s: %w", t.src, name, err)
			}
			if err := t.symlink(name, string(target)); err != nil {
				return err
			}
			continue
		}
		mode := fs.FileMode(0o644)
		if entry.Mode == filemode.Executable {
			mode = 0o755
		}
		err = t.file(name, mode, content)
		r.Close()
		if err != nil {
			return err
		}
	}
}

// gitError names the source and turns go-git's authentication errors into
// ErrDenied, without the credentials.
func gitError(src string, err error) error {
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		return fmt.Errorf("%s: %s: check the credentials: %w", src, strings.Join(strings.Fields(err.Error()), " "), ErrDenied)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("%s: %v: check the URL: %w", src, err, ErrInvalid)
	}
	return named(src, err)
}
