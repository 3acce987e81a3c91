// Package apiclient is a small client of Conveyor's HTTP API for the tools
// that drive a running stack (the benchmark, chaos): JSON calls with a
// bearer token, and an upload through a presigned PUT, confirmed.
package apiclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
)

// Call sends a JSON request (body may be nil) and decodes a JSON object
// answer; a status of 300 or more is an error carrying the body.
func Call(base, method, path, token string, body any) (map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: %s %s", method, path, resp.Status, raw)
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out, nil
}

// PNG is a real n×n PNG image.
func PNG(n int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, n, n))
	img.Set(1, 1, color.RGBA{G: 200, A: 255})
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	return buf.Bytes()
}

// Upload signs an upload slot for data (a PNG), PUTs it to the presigned
// URL and confirms it; it returns the upload id.
func Upload(base, token string, data []byte) (string, error) {
	signed, err := Call(base, "POST", "/v1/uploads/sign", token, map[string]any{"filename": "image.png", "contentType": "image/png", "size": len(data)})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequest(http.MethodPut, signed["url"].(string), bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	for k, v := range signed["headers"].(map[string]any) {
		req.Header.Set(k, fmt.Sprint(v))
	}
	req.ContentLength = int64(len(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return "", fmt.Errorf("presigned PUT: %s", resp.Status)
	}
	id := signed["uploadId"].(string)
	if _, err := Call(base, http.MethodPost, "/v1/uploads/"+id+"/confirm", token, nil); err != nil {
		return "", err
	}
	return id, nil
}
