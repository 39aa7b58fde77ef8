package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// fields lists the yaml-tagged fields of a struct value, by key.
func fields(v reflect.Value) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	t := v.Type()
	for i := range t.NumField() {
		key, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if key != "" && key != "-" {
			out[key] = v.Field(i)
		}
	}
	return out
}

// checkKeys walks a YAML mapping against the struct target and reports the
// first key the struct does not have, with its full dotted path and line.
func checkKeys(node *yaml.Node, target any, prefix string) error {
	return checkNode(node, reflect.ValueOf(target).Elem(), prefix)
}

func checkNode(node *yaml.Node, v reflect.Value, prefix string) error {
	switch v.Kind() {
	case reflect.Pointer:
		return checkNode(node, reflect.New(v.Type().Elem()).Elem(), prefix)
	case reflect.Struct:
		if node.Kind != yaml.MappingNode {
			return nil // the decoder reports the type mismatch
		}
		known := fields(v)
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, val := node.Content[i], node.Content[i+1]
			key := prefix + k.Value
			f, ok := known[k.Value]
			if !ok {
				return fmt.Errorf("line %d: unknown key %q (known under %s: %s)", k.Line, key, orRoot(prefix), strings.Join(sortedKeys(known), ", "))
			}
			if err := checkNode(val, f, key+"."); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if node.Kind != yaml.SequenceNode {
			return nil
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		for i, item := range node.Content {
			if err := checkNode(item, elem, fmt.Sprintf("%s[%d].", strings.TrimSuffix(prefix, "."), i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func orRoot(prefix string) string {
	if prefix == "" {
		return "the top level"
	}
	return strings.TrimSuffix(prefix, ".")
}

func sortedKeys(m map[string]reflect.Value) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// applyEnv sets every scalar setting that has a BERTH_ variable in environ.
// A setting's variable is EnvPrefix plus its dotted key path in upper case with
// dots as underscores: log.level is BERTH_LOG_LEVEL, storage.s3.bucket is
// BERTH_STORAGE_S3_BUCKET.
func applyEnv(c *Config, environ []string) error {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, EnvPrefix) {
			env[k] = v
		}
	}
	if len(env) == 0 {
		return nil
	}
	return walkScalars(reflect.ValueOf(c).Elem(), "", func(key string, f reflect.Value) error {
		name := EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		s, ok := env[name]
		if !ok {
			return nil
		}
		if err := setScalar(f, s); err != nil {
			return fmt.Errorf("%s (%s): %w", name, key, err)
		}
		return nil
	})
}

// EnvNames lists the environment variable of every scalar setting.
func EnvNames() []string {
	var names []string
	_ = walkScalars(reflect.ValueOf(&Config{}).Elem(), "", func(key string, _ reflect.Value) error {
		names = append(names, EnvPrefix+strings.ToUpper(strings.ReplaceAll(key, ".", "_")))
		return nil
	})
	return names
}

// walkScalars calls fn for every scalar field below struct v with its dotted key.
func walkScalars(v reflect.Value, prefix string, fn func(key string, f reflect.Value) error) error {
	fs := fields(v)
	for _, key := range sortedKeys(fs) {
		f := fs[key]
		switch f.Kind() {
		case reflect.Struct:
			if err := walkScalars(f, prefix+key+".", fn); err != nil {
				return err
			}
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int64:
			if err := fn(prefix+key, f); err != nil {
				return err
			}
		}
	}
	return nil
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	byteSizeType = reflect.TypeFor[ByteSize]()
)

func setScalar(f reflect.Value, s string) error {
	switch {
	case f.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want a duration such as 30s (got %q)", s)
		}
		f.SetInt(int64(d))
	case f.Type() == byteSizeType:
		n, err := ParseByteSize(s)
		if err != nil {
			return err
		}
		f.SetInt(int64(n))
	case f.Kind() == reflect.String:
		f.SetString(s)
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false (got %q)", s)
		}
		f.SetBool(b)
	default:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer (got %q)", s)
		}
		f.SetInt(n)
	}
	return nil
}
