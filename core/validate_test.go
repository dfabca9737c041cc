package core

import (
	"strings"
	"testing"
)

func TestValidateNameRefusesControlAndFormatCharacters(t *testing.T) {
	bad := map[string]string{
		"newline":        "a\nb",
		"NUL":            "a\x00b",
		"escape":         "a\x1b[31mred",
		"DEL":            "a\x7fb",
		"C1 control":     "a\u0085b",
		"bidi override":  "a\u202eb",
		"zero width":     "a\u200bb",
		"BOM":            "\ufeffname",
		"invalid UTF-8":  "a\xffb",
		"too long":       strings.Repeat("é", MaxNameRunes+1),
		"only blanks":    " \t ",
		"tab in between": "a\tb",
	}
	for what, name := range bad {
		err := validateCreate(CreateRequest{Name: name})
		if !IsKind(err, KindInvalid) || !strings.HasPrefix(messageOf(err), "name ") {
			t.Errorf("%s: validateCreate(%q) = %v, want an invalid error naming the field name", what, name, err)
		}
	}
	for _, ok := range []string{"demo", "Ünïcode ✓ 项目", strings.Repeat("x", MaxNameRunes), "  padded  ",
		"\U0001F469\u200d\U0001F4BB dev", "می\u200cخواهم"} {
		if err := validateCreate(CreateRequest{Name: ok}); err != nil {
			t.Errorf("validateCreate(%q) = %v, want nil", ok, err)
		}
	}
}

func TestValidateCreateRefusesControlCharactersInOptions(t *testing.T) {
	err := validateCreate(CreateRequest{Name: "a", Options: map[string]string{"image": "x\ny"}})
	if !IsKind(err, KindInvalid) || !strings.Contains(messageOf(err), "options.image") {
		t.Fatalf("got %v, want invalid naming options.image", err)
	}
	err = validateCreate(CreateRequest{Name: "a", Options: map[string]string{"im\x00age": "x"}})
	if !IsKind(err, KindInvalid) || !strings.Contains(messageOf(err), "option name") {
		t.Fatalf("got %v, want invalid naming the option name", err)
	}
}

func TestCheckOptionsAgainstDeclared(t *testing.T) {
	docker := ProviderInfo{Name: "docker", Options: []ConfigField{{Name: "image"}}}
	if err := checkOptions(docker, map[string]string{"image": "x"}); err != nil {
		t.Fatal(err)
	}
	err := checkOptions(docker, map[string]string{"image": "x", "imag": "y"})
	if !IsKind(err, KindInvalid) {
		t.Fatalf("unknown option: %v, want invalid", err)
	}
	for _, want := range []string{"options.imag", "docker", "only image"} {
		if !strings.Contains(messageOf(err), want) {
			t.Errorf("message %q does not say %q", messageOf(err), want)
		}
	}
	none := ProviderInfo{Name: "p", Options: []ConfigField{}}
	if err := checkOptions(none, map[string]string{"x": "1"}); !IsKind(err, KindInvalid) || !strings.Contains(messageOf(err), "no options") {
		t.Fatalf("provider taking no options: %v", err)
	}
	// Undeclared (nil): passed through for the adapter to judge.
	if err := checkOptions(ProviderInfo{Name: "legacy"}, map[string]string{"anything": "1"}); err != nil {
		t.Fatalf("undeclared options refused: %v", err)
	}
}

func TestConsequencesOfAWorkspaceWithoutABox(t *testing.T) {
	lost, survives := consequences(Workspace{Provider: "docker", State: StateError}, ProviderInfo{}, DeleteExportPlan{})
	all := strings.Join(append(lost, survives...), "\n")
	if strings.Contains(all, "the box  at") || strings.Contains(all, "every file in it") {
		t.Fatalf("a workspace with no box is described as having one: %q", all)
	}
	if !strings.Contains(all, "no box at docker") {
		t.Fatalf("preview does not say there is no box: %q", all)
	}
}
