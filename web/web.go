// Package web is the operations dashboard: a static app (TypeScript compiled
// by tsc, see package.json) embedded from dist/ and served under
// /dashboard/. dist/ is committed, so `go build` needs no npm; `make web`
// rebuilds it.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// Prefix is where Handler serves the app.
const Prefix = "/dashboard/"

//go:embed dist
var dist embed.FS

// Files is the built app (index.html at its root).
func Files() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // cannot happen: dist is embedded
	}
	return sub
}

// Handler serves the dashboard under /dashboard/ (and redirects /dashboard
// there). It only reads: GET and HEAD; anything else is 405. The app talks to
// the API of the same origin by default, so mount it beside the API:
//
//	mux.Handle("/dashboard/", web.Handler())
func Handler() http.Handler {
	files := http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(Files()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			target := Prefix
			if r.URL.RawQuery != "" {
				target += "?" + r.URL.RawQuery
			}
			http.Redirect(w, r, target, http.StatusMovedPermanently)
			return
		}
		if !strings.HasPrefix(r.URL.Path, Prefix) {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		// Scripts, styles and images from here only; the API and the event
		// stream may be on another origin (the stream function's URL in AWS).
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src *; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		files.ServeHTTP(w, r)
	})
}
