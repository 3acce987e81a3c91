package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
)

// Response is what a handler answers: an API Gateway HTTP API (payload v2)
// response.
type Response = events.APIGatewayV2HTTPResponse

// ContentTypeJSON is the Content-Type of every JSON response.
const ContentTypeJSON = "application/json"

// JobsPage is the 200 answer of a page of jobs: {"jobs": jobs, "nextCursor":
// the cursor of the next page or null}, with the matches' count in
// X-Total-Count.
func JobsPage(jobs any, nextCursor string, total int) Response {
	var next *string
	if nextCursor != "" {
		next = &nextCursor
	}
	resp := JSON(http.StatusOK, map[string]any{"jobs": jobs, "nextCursor": next})
	resp.Headers["X-Total-Count"] = strconv.Itoa(total)
	return resp
}

// JSON returns a response with status and v encoded as JSON (HTML characters
// not escaped). Its Headers map is never nil, so callers may add to it. If v
// cannot be encoded the response is a 500 internal error instead.
func JSON(status int, v any) Response {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return Response{
			StatusCode: http.StatusInternalServerError,
			Headers:    map[string]string{"Content-Type": ContentTypeJSON},
			Body:       `{"error":{"code":"internal","message":"the response could not be rendered"}}`,
		}
	}
	return Response{StatusCode: status, Headers: map[string]string{"Content-Type": ContentTypeJSON}, Body: buf.String()}
}

// NoContent returns a 204 with no body. Its Headers map is never nil.
func NoContent() Response {
	return Response{StatusCode: http.StatusNoContent, Headers: map[string]string{}}
}
