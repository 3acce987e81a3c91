package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/conveyor/conveyor/internal/ids"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/uploads"
)

// Type is the publish kind's name: a job of confirmed uploads published
// to the external API.
const Type = "publish"

// The phases of a publish job, in order. Download streams each object from
// S3 straight into the upload, so an item's download completes when its
// bytes have all been read by the upload.
const (
	PhaseToken    = "token"
	PhaseDownload = "download"
	PhaseUpload   = "upload"
	PhasePublish  = "publish"
)

// Phases lists the phases of a publish job in order.
var Phases = []string{PhaseToken, PhaseDownload, PhaseUpload, PhasePublish}

// Limits of a publish submission.
const (
	MaxItems       = 20
	MaxTitle       = 200
	MaxDescription = 10000
	MaxTags        = 30
	MaxTagLength   = 50
)

// ProviderDefault is the external provider whose connected account a
// publish job needs when Config.Provider is empty (accounts.Provider).
const ProviderDefault = "deviantart"

// Params are a publish job's params: what the deviation says.
type Params struct {
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
}

// Name is "publish".
func (*Kind) Name() string { return Type }

// Phases are token, download, upload, publish.
func (*Kind) Phases() []string { return slices.Clone(Phases) }

// Normalize trims the text, collapses the title's whitespace, lower-cases,
// de-duplicates and sorts the tags.
func (*Kind) Normalize(s job.Spec) (job.Spec, error) {
	var in Params
	if len(s.Params) > 0 && string(s.Params) != "null" {
		if err := strictDecode(s.Params, &in); err != nil {
			return s, invalid.Field("params", err.Error())
		}
	}
	// The limits hold for what was sent, as openapi.yaml's schema says, as
	// well as for what normalising leaves (Validate).
	if err := rawLimits(in); err != nil {
		return s, err
	}
	n := Params{
		Title:       strings.Join(strings.Fields(in.Title), " "),
		Description: strings.TrimSpace(in.Description),
	}
	for _, tag := range in.Tags {
		if t := strings.ToLower(strings.TrimSpace(tag)); t != "" && !slices.Contains(n.Tags, t) {
			n.Tags = append(n.Tags, t)
		}
	}
	slices.Sort(n.Tags)
	out := job.Spec{}
	for _, it := range s.Items {
		out.Items = append(out.Items, job.SpecItem{UploadID: strings.TrimSpace(it.UploadID)})
	}
	b, err := job.Marshal(n)
	if err != nil {
		return s, err
	}
	out.Params = b
	return out, nil
}

// rawLimits checks the lengths and the count of tags of params as sent,
// before whitespace is trimmed and empty or repeated tags are dropped.
func rawLimits(in Params) error {
	switch {
	case utf8.RuneCountInString(in.Title) > MaxTitle:
		return invalid.Field("params.title", fmt.Sprintf("must be at most %d characters", MaxTitle))
	case utf8.RuneCountInString(in.Description) > MaxDescription:
		return invalid.Field("params.description", fmt.Sprintf("must be at most %d characters", MaxDescription))
	case len(in.Tags) > MaxTags:
		return invalid.Field("params.tags", fmt.Sprintf("must hold at most %d tags", MaxTags))
	}
	for i, tag := range in.Tags {
		if utf8.RuneCountInString(tag) > MaxTagLength {
			return invalid.Field(fmt.Sprintf("params.tags[%d]", i), fmt.Sprintf("must be at most %d characters", MaxTagLength))
		}
	}
	return nil
}

// Validate checks items and params (400s): the limits, and that the text
// to be published holds no control or bidirectional characters
// (invalid.Text).
func (*Kind) Validate(_ context.Context, _ job.ValidationEnv, s job.Spec) error {
	var p Params
	if err := json.Unmarshal(s.Params, &p); err != nil {
		return invalid.Field("params", "must be an object")
	}
	switch {
	case len(s.Items) == 0:
		return invalid.Field("items", "must hold at least one item")
	case len(s.Items) > MaxItems:
		return invalid.Field("items", fmt.Sprintf("must hold at most %d items", MaxItems))
	case p.Title == "":
		return invalid.Field("params.title", "is required")
	case utf8.RuneCountInString(p.Title) > MaxTitle:
		return invalid.Field("params.title", fmt.Sprintf("must be at most %d characters", MaxTitle))
	case utf8.RuneCountInString(p.Description) > MaxDescription:
		return invalid.Field("params.description", fmt.Sprintf("must be at most %d characters", MaxDescription))
	case len(p.Tags) > MaxTags:
		return invalid.Field("params.tags", fmt.Sprintf("must hold at most %d tags", MaxTags))
	}
	seen := map[string]bool{}
	for i, it := range s.Items {
		field := fmt.Sprintf("items[%d].uploadId", i)
		if !ids.Valid(ids.Upload, it.UploadID) {
			return invalid.Field(field, "is not an upload id")
		}
		if seen[it.UploadID] {
			return invalid.Field(field, "is listed twice")
		}
		seen[it.UploadID] = true
	}
	// What is published is text as it will read: no control characters
	// (the title's whitespace is already collapsed to spaces; a
	// description keeps its line breaks), no bidirectional controls.
	if err := invalid.Text("params.title", p.Title, false); err != nil {
		return err
	}
	if err := invalid.Text("params.description", p.Description, true); err != nil {
		return err
	}
	for i, tag := range p.Tags {
		field := fmt.Sprintf("params.tags[%d]", i)
		if utf8.RuneCountInString(tag) > MaxTagLength {
			return invalid.Field(field, fmt.Sprintf("must be at most %d characters", MaxTagLength))
		}
		if err := invalid.Text(field, tag, false); err != nil {
			return err
		}
	}
	return nil
}

// Prepare makes the items, one per upload, reading nothing: the creating
// transaction checks that every upload is confirmed, the owner's and usable
// (it takes a reference on each) and that the owner has a connected account
// (j.NeedsAccount); the worker that first claims the job describes the
// items from the upload records (store.DescribeItems).
func (f *Kind) Prepare(_ context.Context, _ string, s job.Spec, j *job.Job) error {
	for _, it := range s.Items {
		j.Items = append(j.Items, job.Item{ID: ids.New(ids.Item), UploadID: it.UploadID, Status: job.ItemPending})
	}
	j.NeedsAccount = f.cfg.Provider
	return nil
}

// Explain says why the creating transaction refused a job (job.Explainer),
// reading the uploads and the account in one request: the first upload that
// does not exist or is someone else's, expired, or not confirmed, in the
// order the items name them, then a missing account. nil means nothing is
// wrong any more (the refusal raced a confirmation or a connection).
func (f *Kind) Explain(ctx context.Context, owner string, s job.Spec) error {
	if f.cfg.Store == nil {
		return errors.New("publish: no store to explain a refusal with")
	}
	uploadIDs := make([]string, len(s.Items))
	for i, it := range s.Items {
		uploadIDs[i] = it.UploadID
	}
	ups, connected, err := f.cfg.Store.GetUploadsAndAccount(ctx, uploadIDs, owner, f.cfg.Provider)
	if err != nil {
		return err
	}
	for i, id := range uploadIDs {
		u, ok := ups[id]
		field := fmt.Sprintf("items[%d].uploadId", i)
		switch {
		case !ok || u.Owner != owner:
			return &job.UnusableError{Code: "upload_not_found", Field: field, Message: "no such upload"}
		case u.Status == uploads.Expired:
			return ExpiredUpload(field, id)
		case u.Status != uploads.Confirmed:
			return &job.UnusableError{Code: "upload_not_confirmed", Field: field, Message: fmt.Sprintf("upload %s is %s, not confirmed", id, u.Status)}
		}
	}
	if !connected {
		return &job.UnusableError{Code: "account_not_connected", Message: "connect a DeviantArt account first (PUT /v1/account/connection)"}
	}
	return nil
}

// ExpiredUpload is the 422 for an upload no new job may name.
func ExpiredUpload(field, id string) error {
	return &job.UnusableError{Code: "upload_expired", Field: field, Message: fmt.Sprintf("upload %s has expired; upload the file again", id)}
}

// strictDecode decodes b into v, refusing unknown fields.
func strictDecode(b []byte, v any) error {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return errors.New("is not a valid object for this kind: " + err.Error())
	}
	return nil
}
