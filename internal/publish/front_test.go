package publish_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
)

const upl = "upl_aaaaaaaaaaaaaaaaaaaaaaaaaa"

// TestValidateNamesTheField: each refusal is a 400 naming the field at
// fault, after normalisation.
func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	f := publish.New(publish.Config{})
	items := func(ids ...string) []job.SpecItem {
		out := make([]job.SpecItem, len(ids))
		for i, id := range ids {
			out[i] = job.SpecItem{UploadID: id}
		}
		return out
	}
	many := make([]string, publish.MaxItems+1)
	for i := range many {
		many[i] = "upl_" + strings.Repeat(string(rune('a'+i%26)), 25) + string(rune('a'+i/26))
	}
	for _, tc := range []struct {
		name   string
		items  []job.SpecItem
		params string
		field  string
	}{
		{"ok", items(upl), `{"title":"t"}`, ""},
		{"no items", nil, `{"title":"t"}`, "items"},
		{"too many items", items(many...), `{"title":"t"}`, "items"},
		{"no title", items(upl), `{"title":"   "}`, "params.title"},
		{"long title", items(upl), `{"title":"` + strings.Repeat("é", publish.MaxTitle+1) + `"}`, "params.title"},
		{"not an upload id", items("job_x"), `{"title":"t"}`, "items[0].uploadId"},
		{"twice", items(upl, " "+upl), `{"title":"t"}`, "items[1].uploadId"},
		{"long tag", items(upl), `{"title":"t","tags":["` + strings.Repeat("x", publish.MaxTagLength+1) + `"]}`, "params.tags[0]"},
		{"letters of any script", items(upl), `{"title":"кот 🐱 ñ","description":"line one\nline two\r\n\tthree","tags":["猫"]}`, ""},
		{"whitespace collapsed in a title", items(upl), `{"title":"a\tb\nc"}`, ""},
		{"NUL in a title", items(upl), `{"title":"a\u0000b"}`, "params.title"},
		{"escape in a title", items(upl), `{"title":"\u001b[2Jx"}`, "params.title"},
		{"C1 control in a title", items(upl), `{"title":"a\u009bb"}`, "params.title"},
		{"right-to-left override in a title", items(upl), `{"title":"cat\u202egnp.exe"}`, "params.title"},
		{"isolate in a title", items(upl), `{"title":"\u2067x"}`, "params.title"},
		{"NUL in a description", items(upl), `{"title":"t","description":"a\u0000"}`, "params.description"},
		{"mark in a description", items(upl), `{"title":"t","description":"a\u200fb"}`, "params.description"},
		{"control in a tag", items(upl), `{"title":"t","tags":["a","b\u0007"]}`, "params.tags[1]"},
		{"override in a tag", items(upl), `{"title":"t","tags":["\u202dx"]}`, "params.tags[0]"},
	} {
		// A limit is checked on what was sent (Normalize) and on what
		// normalising leaves (Validate): either names the field.
		spec, err := f.Normalize(job.Spec{Items: tc.items, Params: json.RawMessage(tc.params)})
		if err == nil {
			err = f.Validate(context.Background(), job.ValidationEnv{}, spec)
		}
		var fe *invalid.FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v, want it valid", tc.name, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%s: %v, want a 400 on %s", tc.name, err, tc.field)
		}
	}
	if _, err := f.Normalize(job.Spec{Params: json.RawMessage(`{"title":"t","colour":"red"}`)}); err == nil {
		t.Error("an unknown param was accepted")
	}
	// The limits hold for what was sent (openapi.yaml's maxItems and
	// maxLength), not only for what trimming and de-duplicating leave.
	nulls := `null` + strings.Repeat(`,null`, 30)
	padded := `"` + strings.Repeat(" ", 50) + `a"`
	for params, field := range map[string]string{
		`{"title":"t","tags":["a",` + nulls + `]}`:                  "params.tags",
		`{"title":"t","tags":[` + padded + `]}`:                     "params.tags[0]",
		`{"title":` + padded[:1] + strings.Repeat(" ", 200) + `t"}`: "params.title",
	} {
		_, err := f.Normalize(job.Spec{Params: json.RawMessage(params)})
		if fe, ok := invalid.As(err); !ok || fe.Field != field {
			t.Errorf("%.40s…: %v, want a 400 on %s", params, err, field)
		}
	}
}

// TestPrepareMakesAnItemPerUploadAndNeedsTheAccount: the job needs the
// provider's account (checked by the creating transaction).
func TestPrepareMakesAnItemPerUploadAndNeedsTheAccount(t *testing.T) {
	t.Parallel()
	var j job.Job
	f := publish.New(publish.Config{Provider: "elsewhere"})
	if err := f.Prepare(context.Background(), "u1", job.Spec{Items: []job.SpecItem{{UploadID: upl}}}, &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Items) != 1 || j.Items[0].UploadID != upl || j.Items[0].Status != job.ItemPending || j.NeedsAccount != "elsewhere" {
		t.Errorf("job = %+v", j)
	}
	var byDefault job.Job
	if err := publish.New(publish.Config{}).Prepare(context.Background(), "u1", job.Spec{}, &byDefault); err != nil || byDefault.NeedsAccount != publish.ProviderDefault {
		t.Errorf("default provider = %q (%v), want %q", byDefault.NeedsAccount, err, publish.ProviderDefault)
	}
}
