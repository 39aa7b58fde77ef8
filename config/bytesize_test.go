package config

import "testing"

func TestParseByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ByteSize
	}{
		{"0", 0}, {"4096", 4096}, {"10GiB", 10 << 30}, {"500MiB", 500 << 20}, {"1.5GB", 1_500_000_000},
		{"2G", 2 << 30}, {"3Ki", 3 << 10}, {" 7 MB ", 7_000_000}, {"1TiB", 1 << 40}, {"12B", 12}, {"0.5KiB", 512},
	} {
		got, err := ParseByteSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "GiB", "-1", "-1GiB", "ten", "1.3B", "10 XB", "9999999TiB", "1e30", "0x10"} {
		if got, err := ParseByteSize(bad); err == nil {
			t.Errorf("ParseByteSize(%q) = %d; want an error", bad, got)
		}
	}
	if s := ByteSize(10 << 30).String(); s != "10GiB" {
		t.Errorf("String = %q", s)
	}
}

func TestByteSizeFromYAMLAndEnv(t *testing.T) {
	c := &Config{}
	if err := decodeYAML([]byte("namespaces: [{name: team-a, quota: 10GiB}]\nregistry: {uploads: {maxSize: 2GiB}}\n"), c); err != nil {
		t.Fatal(err)
	}
	if c.Namespaces[0].Quota != 10<<30 || c.Registry.Uploads.MaxSize != 2<<30 {
		t.Fatalf("decoded %d, %d", c.Namespaces[0].Quota, c.Registry.Uploads.MaxSize)
	}
	if err := decodeYAML([]byte("registry: {uploads: {maxSize: lots}}\n"), &Config{}); err == nil {
		t.Error("maxSize: lots decoded")
	}
	if err := applyEnv(c, []string{"BERTH_REGISTRY_UPLOADS_MAXSIZE=5MiB"}); err != nil || c.Registry.Uploads.MaxSize != 5<<20 {
		t.Fatalf("env: %d, %v", c.Registry.Uploads.MaxSize, err)
	}
	if err := applyEnv(c, []string{"BERTH_REGISTRY_UPLOADS_MAXSIZE=5 parsecs"}); err == nil {
		t.Error("a bad size from the environment was taken")
	}
}

func TestByteSizeHuman(t *testing.T) {
	for n, want := range map[ByteSize]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 3 << 40: "3.0 TiB", 5 << 50: "5.0 PiB", 2048 << 50: "2048.0 PiB"} {
		if got := n.Human(); got != want {
			t.Errorf("ByteSize(%d).Human() = %q, want %q", int64(n), got, want)
		}
	}
}
