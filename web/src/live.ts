// The session's live feed: one /v1/events stream shared by every view.
// Views subscribe to job events; the header shows the stream's state.

import type { Api } from './api.js';
import { EventStream, type StreamState } from './sse.js';
import type { Job, JobEvent } from './types.js';

type Listener = (ev: JobEvent) => void;
type StateListener = (s: StreamState, detail?: string) => void;

export class Live {
  private stream: EventStream | null = null;
  private listeners = new Set<Listener>();
  private stateListeners = new Set<StateListener>();
  state: StreamState = 'closed';
  snapshot: Job[] = [];
  // The most recent events, newest first (the overview shows them).
  recent: JobEvent[] = [];

  constructor(private readonly api: Api) {}

  start(): void {
    if (this.stream) return;
    this.stream = new EventStream({
      url: this.api.eventsUrl('/v1/events'),
      headers: () => this.api.headers(),
      onState: (s, d) => {
        this.state = s;
        for (const l of this.stateListeners) l(s, d);
      },
      onRefused: (status) => {
        if (status === 401) this.api.onUnauthorized?.();
      },
      onFrame: (f) => {
        if (f.event === 'ping') return;
        let data: unknown;
        try {
          data = JSON.parse(f.data);
        } catch {
          return;
        }
        if (f.event === 'snapshot') {
          this.snapshot = ((data as { jobs?: Job[] }).jobs ?? []).slice();
          return;
        }
        const ev = data as JobEvent;
        if (!ev || typeof ev !== 'object' || !ev.jobId) return;
        this.recent.unshift(ev);
        this.recent.length = Math.min(this.recent.length, 50);
        for (const l of this.listeners) l(ev);
      },
    });
  }

  stop(): void {
    this.stream?.close();
    this.stream = null;
    this.listeners.clear();
    this.stateListeners.clear();
  }

  subscribe(l: Listener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  onState(l: StateListener): () => void {
    this.stateListeners.add(l);
    l(this.state);
    return () => this.stateListeners.delete(l);
  }
}
