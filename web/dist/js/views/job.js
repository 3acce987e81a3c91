// One job: its state, its phases as a timeline, items and outputs, and its
// events, live from /v1/jobs/{id}/events (the snapshot first, then every
// event with the job as it was right after).
import { ApiError, describe } from '../api.js';
import { badge, duration, h, replace, timeEl } from '../dom.js';
import { EventStream } from '../sse.js';
const FINISHED = new Set(['succeeded', 'failed', 'cancelled', 'stale']);
export const jobView = (root, ctx, params) => {
    const id = params['id'] ?? '';
    const title = h('h1', null, 'Job ', h('code', null, id));
    const state = h('div', { class: 'job-state', 'data-testid': 'job-state', role: 'status', 'aria-live': 'polite' }, 'Loading…');
    const actions = h('div', { class: 'actions' });
    const details = h('dl', { class: 'details' });
    const timeline = h('ol', { class: 'timeline', 'data-testid': 'timeline' });
    const items = h('tbody');
    const result = h('div', { 'data-testid': 'result' });
    const streamState = h('span', { class: 'muted', 'data-testid': 'job-stream' }, 'not connected');
    const events = h('ol', { class: 'events', 'data-testid': 'job-events', reversed: true });
    const waitEl = h('p', { class: 'wait', 'data-testid': 'job-wait', hidden: true });
    const attemptsBody = h('tbody', { 'data-testid': 'attempts' });
    let job = null;
    let lastUpdated = 0;
    replace(root, h('p', null, h('a', { href: '#/jobs' }, '← Jobs')), title, state, waitEl, actions, details, h('section', { 'aria-labelledby': 'attempts-h' }, h('h2', { id: 'attempts-h' }, 'Attempts'), h('table', { class: 'data' }, h('thead', null, h('tr', null, ['#', 'Started', 'Duration', 'Outcome', 'Error'].map((t) => h('th', { scope: 'col' }, t)))), attemptsBody)), h('section', { 'aria-labelledby': 'phases-h' }, h('h2', { id: 'phases-h' }, 'Phases'), timeline), h('section', { 'aria-labelledby': 'items-h' }, h('h2', { id: 'items-h' }, 'Items and outputs'), h('table', { class: 'data' }, h('thead', null, h('tr', null, ['Item', 'Upload', 'Status', 'Output', 'Error'].map((t) => h('th', { scope: 'col' }, t)))), items), result), h('section', { 'aria-labelledby': 'events-h' }, h('h2', { id: 'events-h' }, 'Events ', streamState), events));
    function phaseItem(p, i, j) {
        const took = duration(p.startedAt, p.completedAt);
        const current = j.status === 'running' && p.status === 'running';
        return h('li', { class: `phase phase-${p.status}`, 'data-phase': p.name, 'data-status': p.status, 'aria-current': current ? 'step' : undefined }, h('span', { class: 'dot', 'aria-hidden': 'true' }, String(i + 1)), h('div', null, h('strong', null, p.name), ' ', badge(p.status), ' ', h('progress', { max: 100, value: p.progress, 'aria-label': `${p.name} progress` }), ` ${p.progress}%`, h('div', { class: 'muted small' }, p.startedAt ? ['started ', timeEl(p.startedAt)] : 'not started', p.completedAt ? [', completed ', timeEl(p.completedAt)] : null, took ? ` (${took})` : null), p.message ? h('div', null, p.message) : null, p.error ? h('div', { class: 'error' }, `${p.error.code}: ${p.error.message}`) : null));
    }
    function show(j) {
        const t = Date.parse(j.updatedAt);
        if (job && t < lastUpdated)
            return; // an older state than the one shown
        job = j;
        lastUpdated = t;
        root.dataset['status'] = j.status;
        replace(state, badge(j.status), ' ', h('span', null, `phase ${j.phase}, ${j.progress}%`), j.error ? h('p', { class: 'error' }, `${j.error.code}: ${j.error.message}${j.error.retryable ? ' (retryable)' : ''}`) : null);
        const dd = (label, v) => [h('dt', null, label), h('dd', null, v)];
        replace(details, dd('Title', j.params?.title ?? '—'), dd('Type', j.type), dd('Tier', j.tier), dd('Attempts', `${j.attempts} of ${j.maxAttempts}`), dd('Created', timeEl(j.createdAt)), j.scheduleAt ? dd('Scheduled for', timeEl(j.scheduleAt)) : null, dd('Started', timeEl(j.startedAt)), dd('Finished', timeEl(j.finishedAt)), dd('Updated', timeEl(j.updatedAt)));
        replace(timeline, (j.phases ?? []).map((p, i) => phaseItem(p, i, j)));
        replace(items, (j.items ?? []).map((it) => h('tr', { 'data-item': it.id, 'data-status': it.status }, h('th', { scope: 'row' }, h('code', null, it.id)), h('td', null, h('code', null, it.uploadId)), h('td', null, badge(it.status)), h('td', null, it.output ? [h('code', null, it.output.deviationId), ' ', it.output.url ? h('a', { href: it.output.url, rel: 'noopener noreferrer', target: '_blank' }, 'open') : null] : '—'), h('td', null, it.error ? `${it.error.code}: ${it.error.message}` : ''))));
        replace(result, resultView(j.result));
        showWait(j);
        refreshAttempts();
        const finished = FINISHED.has(j.status);
        replace(actions, !finished ? h('button', { type: 'button', onclick: () => void act('cancel') }, 'Cancel job') : null, ['failed', 'cancelled', 'stale'].includes(j.status) ? h('button', { type: 'button', onclick: () => void act('retry') }, 'Retry job') : null);
    }
    // The next attempt and why, when the job says it waits (the job's wait
    // field: reason, until, detail; absent on an API without it).
    function showWait(j) {
        const w = j.wait;
        if (!w || FINISHED.has(j.status)) {
            waitEl.hidden = true;
            return;
        }
        waitEl.hidden = false;
        replace(waitEl, 'Waiting: ', h('strong', null, w.reason ?? 'unknown reason'), w.until ? [', next attempt ', timeEl(w.until)] : null, w.detail ? h('span', { class: 'muted' }, ` — ${w.detail}`) : null);
    }
    // Every attempt (GET /v1/jobs/{id}/attempts), refreshed with each change
    // of the job, at most one read at a time.
    let attemptsBusy = false;
    let attemptsAgain = false;
    function refreshAttempts() {
        if (attemptsBusy) {
            attemptsAgain = true;
            return;
        }
        attemptsBusy = true;
        ctx.api
            .get(`/v1/jobs/${encodeURIComponent(id)}/attempts`)
            .then((p) => {
            replace(attemptsBody, p.attempts.length === 0
                ? h('tr', null, h('td', { colspan: 5, class: 'muted' }, 'No attempt yet.'))
                : p.attempts.map((a) => h('tr', { 'data-outcome': a.outcome, 'data-number': a.number }, h('th', { scope: 'row' }, String(a.number)), h('td', null, timeEl(a.startedAt)), h('td', { 'data-testid': 'attempt-duration' }, a.durationMs === null ? 'running' : `${(a.durationMs / 1000).toFixed(1)} s`), h('td', null, badge(a.outcome)), h('td', { class: a.error ? 'error' : '' }, a.error ? `${a.error.code}: ${a.error.message}` : ''))));
        })
            .catch(() => {
            /* an API without the route: the table stays as it was */
        })
            .finally(() => {
            attemptsBusy = false;
            if (attemptsAgain && !gone) {
                attemptsAgain = false;
                refreshAttempts();
            }
        });
    }
    async function act(what) {
        try {
            const j = await ctx.api.post(`/v1/jobs/${encodeURIComponent(id)}/${what}`);
            lastUpdated = 0;
            show(j);
            // A retried job runs again: follow its new run (its stream had ended).
            if (what === 'retry' && streamDone)
                openStream(Math.max(0, ...seen));
            ctx.notify(what === 'cancel' ? `Job ${id} cancelled.` : `Job ${id} queued again.`);
        }
        catch (e) {
            ctx.notify(`Could not ${what} the job: ${describe(e)}`, 'error');
        }
    }
    function eventItem(ev) {
        const detail = ev.detail ? Object.entries(ev.detail).map(([k, v]) => `${k}=${v}`).join(' ') : '';
        return h('li', { 'data-type': ev.type, 'data-seq': ev.seq }, timeEl(ev.at), ' ', h('code', null, ev.type), ev.job ? [' → ', badge(ev.job.status)] : null, detail ? h('span', { class: 'muted' }, ` ${detail}`) : null);
    }
    let stream = null;
    let gone = false;
    let streamDone = false;
    const seen = new Set();
    // openStream follows the job live from the event after `after` (0: its
    // whole history).
    function openStream(after) {
        stream?.close();
        streamDone = false;
        stream = new EventStream({
            url: ctx.api.eventsUrl(`/v1/jobs/${encodeURIComponent(id)}/events`),
            headers: () => ctx.api.headers(),
            lastEventId: String(after), // "0": the job's whole history, then live
            // The server ends a job's stream after its finishing event: no
            // reconnect then (a retry opens a new one).
            complete: () => job !== null && FINISHED.has(job.status),
            onState: (s, d) => {
                streamState.textContent = s === 'open' ? '(live)' : s === 'retrying' ? `(reconnecting: ${d ?? ''})` : s === 'refused' ? `(refused: ${d ?? ''})` : s === 'connecting' ? '(connecting…)' : d === 'complete' ? '(ended: the job is finished)' : '';
                if (s === 'closed' && d === 'complete')
                    streamDone = true;
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
                    show(data);
                    return;
                }
                const ev = data;
                if (typeof ev.seq === 'number') {
                    if (seen.has(ev.seq))
                        return;
                    seen.add(ev.seq);
                }
                events.prepend(eventItem(ev));
                if (ev.job)
                    show(ev.job);
            },
        });
    }
    ctx.api
        .get(`/v1/jobs/${encodeURIComponent(id)}`)
        .then((j) => {
        if (gone)
            return;
        show(j);
        openStream(0);
    })
        .catch((e) => {
        if (gone)
            return;
        replace(state, h('p', { class: 'error', role: 'alert' }, e instanceof ApiError && e.status === 404 ? `No job ${id} (or it belongs to another user).` : describe(e)));
    });
    return () => {
        gone = true;
        stream?.close();
    };
};
/** resultView renders a job's result by its kind: a deviation, an HTTP
 * response, or any other kind's result as JSON. */
function resultView(r) {
    if (!r)
        return null;
    if ('deviationId' in r && typeof r.deviationId === 'string') {
        const url = typeof r.url === 'string' ? r.url : '';
        return h('p', null, 'Result: deviation ', h('code', { 'data-testid': 'deviation' }, r.deviationId), url ? [' — ', h('a', { href: url, rel: 'noopener noreferrer', target: '_blank' }, url)] : null);
    }
    if ('status' in r && typeof r.status === 'number' && 'durationMs' in r) {
        return h('p', null, 'Result: HTTP ', h('code', { 'data-testid': 'http-status' }, String(r.status)), ` in ${String(r.durationMs)} ms`);
    }
    return h('p', null, 'Result: ', h('code', null, JSON.stringify(r)));
}
