package main

import "github.com/conveyor/conveyor/internal/apiclient"

// api is the API client of target t: its URL and token, the CLI's HTTP
// client (and so its timeout).
func (c *cli) api(t target) *apiclient.Client {
	return apiclient.New(t.url, apiclient.WithToken(t.token), apiclient.WithHTTPClient(c.http), apiclient.WithUserAgent("conveyor-cli"))
}
