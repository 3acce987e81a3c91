package httpapi

import (
	"encoding/base64"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"
)

// DashboardOptions configures the dashboard's headers per environment.
type DashboardOptions struct {
	// Local drops HSTS (the local stack is plain HTTP on 127.0.0.1) and lets
	// the app reach a stream on another local port (binary mode).
	Local bool
}

// Security headers of every dashboard response. The CSP is strict: only
// the dashboard's own scripts and styles (no inline script, no eval), no
// frames, no plugins, no forms; the app talks to the API of its own origin
// and to the event stream, which in AWS is the stream function's URL
// (https://….lambda-url.<region>.on.aws).
const (
	dashboardCSP      = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; connect-src 'self' "
	dashboardConnect  = "https://*.on.aws"
	localConnect      = "http://127.0.0.1:* http://localhost:*"
	dashboardHSTS     = "max-age=63072000; includeSubDomains"
	dashboardPrefix   = "/dashboard"
	dashboardIndex    = "index.html"
	dashboardNotFound = "no such file in the dashboard"
)

// RegisterDashboard serves the operations dashboard's files (index.html at
// their root; the wiring hands it web.Files, the embedded app) under
// /dashboard/ from the router the api function runs, so AWS (API Gateway →
// api Lambda) and the local stack serve it identically: GET and HEAD only,
// /dashboard redirected to /dashboard/, with security headers.
func RegisterDashboard(rt *Router, files fs.FS, o DashboardOptions) {
	d := dashboard{files: files, headers: dashboardHeaders(o)}
	rt.Handle(http.MethodGet, dashboardPrefix+"/{file...}", Public, d.serve)
	rt.Handle(http.MethodHead, dashboardPrefix+"/{file...}", Public, d.serve)
}

func dashboardHeaders(o DashboardOptions) map[string]string {
	connect := dashboardConnect
	if o.Local {
		connect = localConnect
	}
	h := map[string]string{
		"Content-Security-Policy": dashboardCSP + connect,
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
		"Cache-Control":           "no-cache",
	}
	if !o.Local {
		h["Strict-Transport-Security"] = dashboardHSTS
	}
	return h
}

type dashboard struct {
	files   fs.FS
	headers map[string]string
}

func (d dashboard) respond(status int, contentType string, body []byte, head bool) Response {
	resp := Response{StatusCode: status, Headers: map[string]string{"Content-Type": contentType}}
	for k, v := range d.headers {
		resp.Headers[k] = v
	}
	if head {
		return resp
	}
	if utf8.Valid(body) {
		resp.Body = string(body)
	} else {
		resp.Body, resp.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	return resp
}

func (d dashboard) serve(r *Request) (Response, error) {
	head := r.Raw.RequestContext.HTTP.Method == http.MethodHead
	raw := r.Raw.RawPath
	if raw == "" {
		raw = r.Raw.RequestContext.HTTP.Path
	}
	if raw == dashboardPrefix {
		resp := d.respond(http.StatusMovedPermanently, "text/plain; charset=utf-8", nil, true)
		target := dashboardPrefix + "/"
		if r.Raw.RawQueryString != "" {
			target += "?" + r.Raw.RawQueryString
		}
		resp.Headers["Location"] = target
		return resp, nil
	}
	name := r.Params["file"]
	if name == "" || strings.HasSuffix(raw, "/") {
		name = path.Join(name, dashboardIndex)
	}
	if !fs.ValidPath(name) {
		return Response{}, Errorf(http.StatusNotFound, CodeNotFound, dashboardNotFound)
	}
	body, err := fs.ReadFile(d.files, name)
	if err != nil {
		return Response{}, Errorf(http.StatusNotFound, CodeNotFound, dashboardNotFound)
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	return d.respond(http.StatusOK, ct, body, head), nil
}
