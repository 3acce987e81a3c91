// Command recovery runs on EventBridge Scheduler: every 5 minutes it
// re-enqueues stuck jobs; every minute it releases scheduled jobs whose
// time came and, in an invocation of its own, moves finished jobs through
// retention.
package main

import "github.com/conveyor/conveyor/internal/handler"

func main() { handler.Start(handler.Recovery) }
