// Server-Sent Events over fetch(): EventSource cannot send an Authorization
// header, so the stream is read from a ReadableStream and parsed here
// (the text/event-stream format: `id:`, `event:`, `data:` lines, a blank
// line ends a frame). It reconnects with backoff and Last-Event-ID, unless
// the stream is complete (StreamOptions.complete).
export class EventStream {
    opts;
    abort = new AbortController();
    lastId = '';
    stopped = false;
    backoff = 500;
    constructor(opts) {
        this.opts = opts;
        this.lastId = opts.lastEventId ?? '';
        void this.run();
    }
    close() {
        this.stopped = true;
        this.abort.abort();
        this.opts.onState?.('closed');
    }
    async run() {
        while (!this.stopped) {
            this.opts.onState?.('connecting');
            try {
                const headers = { ...this.opts.headers(), Accept: 'text/event-stream' };
                if (this.lastId)
                    headers['Last-Event-ID'] = this.lastId;
                const res = await fetch(this.opts.url, { headers, signal: this.abort.signal, cache: 'no-store' });
                if (res.status >= 400 && res.status < 500) {
                    this.stopped = true;
                    this.opts.onState?.('refused', `HTTP ${res.status}`);
                    this.opts.onRefused?.(res.status);
                    return;
                }
                if (!res.ok || !res.body)
                    throw new Error(`HTTP ${res.status}`);
                this.opts.onState?.('open');
                this.backoff = 500;
                await this.read(res.body);
                if (this.stopped)
                    return;
                if (this.opts.complete?.()) {
                    this.stopped = true;
                    this.opts.onState?.('closed', 'complete');
                    return;
                }
                throw new Error('the stream ended');
            }
            catch (e) {
                if (this.stopped)
                    return;
                this.opts.onState?.('retrying', e.message);
                await new Promise((r) => setTimeout(r, this.backoff));
                this.backoff = Math.min(this.backoff * 2, 10_000);
            }
        }
    }
    async read(body) {
        const reader = body.getReader();
        const decoder = new TextDecoder();
        let buf = '';
        let frame = { id: '', event: 'message', data: '' };
        let hasData = false;
        try {
            for (;;) {
                const { value, done } = await reader.read();
                if (done)
                    return;
                buf += decoder.decode(value, { stream: true });
                let nl;
                while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
                    const line = buf.slice(0, nl);
                    buf = buf.slice(nl + (buf[nl] === '\r' && buf[nl + 1] === '\n' ? 2 : 1));
                    if (line === '') {
                        if (hasData) {
                            if (frame.id)
                                this.lastId = frame.id;
                            this.opts.onFrame(frame);
                        }
                        frame = { id: '', event: 'message', data: '' };
                        hasData = false;
                        continue;
                    }
                    if (line.startsWith(':'))
                        continue;
                    const colon = line.indexOf(':');
                    const field = colon < 0 ? line : line.slice(0, colon);
                    let value = colon < 0 ? '' : line.slice(colon + 1);
                    if (value.startsWith(' '))
                        value = value.slice(1);
                    if (field === 'data') {
                        frame.data = hasData ? `${frame.data}\n${value}` : value;
                        hasData = true;
                    }
                    else if (field === 'event') {
                        frame.event = value;
                    }
                    else if (field === 'id') {
                        frame.id = value;
                    }
                }
            }
        }
        finally {
            reader.releaseLock();
        }
    }
}
