package pkgformat

// readPlain reads a plain bundle (rukpak plain+v0): Kubernetes YAML under
// manifests/. It carries no name or version, so both come from Options.
func readPlain(pf *pkgFiles) (*parsed, error) {
	if pf.opts.Name == "" || pf.opts.Version == "" {
		return nil, invalid(manifestsDir+"/", "plain package: its name and version must be given")
	}
	var objs objects
	for _, f := range yamlFiles(pf.under(manifestsDir)) {
		if err := objs.addFile(f.Path, f.Data, pf.yaml); err != nil {
			return nil, err
		}
	}
	md := &Metadata{
		Format:        Plain,
		Name:          pf.opts.Name,
		Version:       pf.opts.Version,
		ProvidedAPIs:  objs.provided,
		Permissions:   objs.permissions(),
		RelatedImages: objs.images,
		Images:        objs.found.list(),
	}
	return &parsed{md: md, nameFile: "the given name", versionFile: "the given version"}, nil
}
