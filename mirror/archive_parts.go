package mirror

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// assemble finds the tar file holding the archive manifest, orders the
// files as the parts it lists, indexes their blobs and records what is
// cut or missing.
func (a *Archive) assemble() error {
	for _, t := range a.files {
		if len(a.files) > 1 && t.listing == nil && t.cut == "" {
			return fmt.Errorf("%s is not a part of a split archive (it has no %s): give one tar file alone, or every part", t.path, PartFile)
		}
	}
	var holders []*tarFile
	for _, t := range a.files {
		if _, ok := t.meta[ManifestFile]; ok {
			holders = append(holders, t)
		}
	}
	switch {
	case len(holders) > 1:
		return fmt.Errorf("%s and %s both hold %s: give the parts of one archive", holders[0].path, holders[1].path, ManifestFile)
	case len(holders) == 0:
		return a.noManifest()
	}
	last := holders[0]
	if err := a.readMeta(last.path, func(name string) ([]byte, error) {
		b, ok := last.meta[name]
		if !ok {
			return nil, fs.ErrNotExist
		}
		return b, nil
	}); err != nil {
		return err
	}
	a.lost = map[int]string{}
	if len(a.manifest.Parts) == 0 {
		if len(a.files) > 1 || last.listing != nil {
			return fmt.Errorf("%s: %s lists no parts, but %s is a part of a split archive", last.path, ManifestFile, strings.Join(a.paths(), ", "))
		}
		a.note(0, last.cut)
		return a.indexBlobs()
	}
	if len(a.files) == 1 && last.listing == nil && last.cut == "" {
		return fmt.Errorf("%s: %s lists %d parts, but this is a single tar file", last.path, ManifestFile, len(a.manifest.Parts))
	}
	if err := a.orderParts(last); err != nil {
		return err
	}
	return a.indexBlobs()
}

// noManifest is the error for tar files none of which holds the archive
// manifest: it says which are cut, since the manifest is written last.
func (a *Archive) noManifest() error {
	var cut []string
	for _, t := range a.files {
		if t.cut != "" && (t.listing == nil || t.listing.Last) {
			cut = append(cut, t.cut)
		}
	}
	if len(cut) > 0 {
		return fmt.Errorf("%s: %s and %s are written at the end of the archive (of its last part), so they are lost and nothing can be imported: copy it again", strings.Join(cut, "; "), ocispec.ImageIndexFile, ManifestFile)
	}
	if len(a.files) == 1 && a.files[0].listing == nil {
		return fmt.Errorf("%s: not a berth archive: %s: %w", a.files[0].path, ManifestFile, fs.ErrNotExist)
	}
	return fmt.Errorf("no last part (the one holding %s) among %s", ManifestFile, strings.Join(a.paths(), ", "))
}

// orderParts numbers the tar files as the parts the manifest lists (by
// their listing, or by their file name when cut before it), checks they are
// parts of one archive, and records what is cut or missing.
func (a *Archive) orderParts(last *tarFile) error {
	parts := a.manifest.Parts
	byNumber := map[int]*tarFile{}
	for _, t := range a.files {
		switch {
		case t == last:
			t.number = len(parts)
		case t.listing != nil:
			if last.listing != nil && t.listing.Archive != last.listing.Archive {
				return fmt.Errorf("%s and %s are parts of different archives (%s, %s)", last.path, t.path, last.listing.Archive, t.listing.Archive)
			}
			if t.listing.Last {
				return fmt.Errorf("%s and %s both say they are the last part", last.path, t.path)
			}
			t.number = t.listing.Number
		default:
			// A part cut before its listing is known by its file name.
			for _, p := range parts {
				if p.File == filepath.Base(t.path) {
					t.number = p.Number
				}
			}
			if t.cut == "" || t.number == 0 {
				return fmt.Errorf("%s is not a part of the archive of %s: it has no %s and its name is not a part's", t.path, last.path, PartFile)
			}
		}
		if t.number < 1 || t.number > len(parts) {
			return fmt.Errorf("%s is part %d, but %s lists %d parts", t.path, t.number, ManifestFile, len(parts))
		}
		if prev, ok := byNumber[t.number]; ok {
			return fmt.Errorf("%s and %s are both part %d", prev.path, t.path, t.number)
		}
		byNumber[t.number] = t
	}
	ordered := make([]*tarFile, 0, len(a.files))
	for i, p := range parts {
		if p.Number != i+1 {
			return fmt.Errorf("%s: %s lists part %d in place of part %d", last.path, ManifestFile, p.Number, i+1)
		}
		t, ok := byNumber[p.Number]
		switch {
		case !ok:
			a.note(p.Number, fmt.Sprintf("part %d of %d (%s) is missing", p.Number, len(parts), p.File))
			continue
		case t.cut != "":
			a.note(p.Number, t.cut)
		case t != last && t.size != p.Size:
			a.note(p.Number, fmt.Sprintf("%s: part %d has %d bytes, %s says %d: the part is truncated or not the one exported", t.path, p.Number, t.size, ManifestFile, p.Size))
		}
		ordered = append(ordered, t)
	}
	a.files = ordered
	return nil
}

// note records why the blobs of part n are not all there.
func (a *Archive) note(n int, why string) {
	if why != "" {
		a.lost[n] = why
		a.damage = append(a.damage, why)
	}
}

// indexBlobs records where each blob of the tar files is.
func (a *Archive) indexBlobs() error {
	for i, t := range a.files {
		for _, b := range t.blobs {
			if prev, ok := a.blobs[b.digest]; ok {
				return fmt.Errorf("%s: %s is in the archive twice (also %s)", t.path, b.digest, prev.name)
			}
			a.blobs[b.digest] = blobLoc{file: i, name: t.path + ": " + blobName(b.digest), off: b.off, size: b.size}
		}
	}
	return nil
}

// Damage says what of the archive is lost: each part missing or cut, and
// where. It is empty for a whole archive.
func (a *Archive) Damage() []string { return a.damage }
