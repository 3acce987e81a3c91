// The session's live feed: one /v1/events stream shared by every view.
// Views subscribe to job events; the header shows the stream's state.
import { EventStream } from './sse.js';
export class Live {
    api;
    stream = null;
    listeners = new Set();
    stateListeners = new Set();
    state = 'closed';
    snapshot = [];
    // The most recent events, newest first (the overview shows them).
    recent = [];
    constructor(api) {
        this.api = api;
    }
    start() {
        if (this.stream)
            return;
        this.stream = new EventStream({
            url: this.api.eventsUrl('/v1/events'),
            headers: () => this.api.headers(),
            onState: (s, d) => {
                this.state = s;
                for (const l of this.stateListeners)
                    l(s, d);
            },
            onRefused: (status) => {
                if (status === 401)
                    this.api.onUnauthorized?.();
            },
            onFrame: (f) => {
                if (f.event === 'ping')
                    return;
                let data;
                try {
                    data = JSON.parse(f.data);
                }
                catch {
                    return;
                }
                if (f.event === 'snapshot') {
                    this.snapshot = (data.jobs ?? []).slice();
                    return;
                }
                const ev = data;
                if (!ev || typeof ev !== 'object' || !ev.jobId)
                    return;
                this.recent.unshift(ev);
                this.recent.length = Math.min(this.recent.length, 50);
                for (const l of this.listeners)
                    l(ev);
            },
        });
    }
    stop() {
        this.stream?.close();
        this.stream = null;
        this.listeners.clear();
        this.stateListeners.clear();
    }
    subscribe(l) {
        this.listeners.add(l);
        return () => this.listeners.delete(l);
    }
    onState(l) {
        this.stateListeners.add(l);
        l(this.state);
        return () => this.stateListeners.delete(l);
    }
}
