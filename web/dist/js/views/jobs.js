// Jobs by status, newest first, with a search by id; rows follow the live
// events.
import { ApiError, describe } from '../api.js';
import { badge, h, replace, timeEl } from '../dom.js';
import { JOB_STATUSES } from '../types.js';
const PAGE = 50;
export const jobsView = (root, ctx, params) => {
    const status = JOB_STATUSES.includes(params['status']) ? params['status'] : '';
    const abort = new AbortController();
    // Search by id.
    const idInput = h('input', { id: 'job-search', name: 'jobId', type: 'search', placeholder: 'job_…', autocomplete: 'off', spellcheck: 'false', required: true });
    const searchMsg = h('p', { class: 'error', role: 'alert', hidden: true });
    const search = h('form', { class: 'search', role: 'search', 'aria-label': 'Find a job by id' }, h('label', { for: 'job-search' }, 'Job id'), idInput, h('button', { type: 'submit' }, 'Open'), searchMsg);
    search.addEventListener('submit', async (e) => {
        e.preventDefault();
        const id = idInput.value.trim();
        searchMsg.hidden = true;
        if (!id)
            return;
        try {
            await ctx.api.get(`/v1/jobs/${encodeURIComponent(id)}`);
            ctx.navigate(`#/jobs/${encodeURIComponent(id)}`);
        }
        catch (err) {
            searchMsg.textContent = err instanceof ApiError && err.status === 404 ? `No job ${id} (or it belongs to another user).` : describe(err);
            searchMsg.hidden = false;
        }
    });
    // The status filter.
    const filters = h('nav', { class: 'filters', 'aria-label': 'Filter by status' }, h('ul', null, ['', ...JOB_STATUSES].map((s) => h('li', null, h('a', { href: s ? `#/jobs?status=${s}` : '#/jobs', 'aria-current': s === status ? 'page' : undefined }, s || 'all')))));
    const count = h('p', { class: 'muted', 'data-testid': 'jobs-count' }, 'Loading…');
    const tbody = h('tbody');
    const more = h('button', { type: 'button', hidden: true }, 'Load more');
    const table = h('table', { class: 'data' }, h('caption', { class: 'visually-hidden' }, status ? `Jobs with status ${status}` : 'All jobs'), h('thead', null, h('tr', null, ['Job', 'Status', 'Tier', 'Phase', 'Progress', 'Attempts', 'Title', 'Updated'].map((t) => h('th', { scope: 'col' }, t)))), tbody);
    replace(root, h('h1', null, 'Jobs'), search, filters, count, table, more);
    const rows = new Map();
    let cursor = null;
    function row(j) {
        return h('tr', { 'data-job': j.id, 'data-status': j.status }, h('th', { scope: 'row' }, h('a', { href: `#/jobs/${encodeURIComponent(j.id)}` }, h('code', null, j.id))), h('td', null, badge(j.status)), h('td', null, j.tier), h('td', null, j.phase), h('td', null, h('progress', { max: 100, value: j.progress, 'aria-label': `${j.id} progress` }), ` ${j.progress}%`), h('td', { class: 'num' }, `${j.attempts}/${j.maxAttempts}`), h('td', null, j.params?.title ?? ''), h('td', null, timeEl(j.updatedAt)));
    }
    function put(j, atTop) {
        const old = rows.get(j.id);
        if (old && Number(old.dataset['updated'] ?? 0) > Date.parse(j.updatedAt))
            return; // an older state
        const r = row(j);
        r.dataset['updated'] = String(Date.parse(j.updatedAt));
        if (old)
            old.replaceWith(r);
        else if (atTop)
            tbody.prepend(r);
        else
            tbody.append(r);
        rows.set(j.id, r);
        tbody.querySelector('.empty')?.remove();
    }
    async function load() {
        const q = new URLSearchParams({ limit: String(PAGE) });
        if (status)
            q.set('status', status);
        if (cursor)
            q.set('cursor', cursor);
        try {
            const { data, response } = await ctx.api.request('GET', `/v1/jobs?${q}`, undefined, abort.signal);
            for (const j of data.jobs)
                put(j, false);
            cursor = data.nextCursor;
            more.hidden = !cursor;
            const total = response.headers.get('X-Total-Count');
            count.textContent = total !== null ? `${total} job${total === '1' ? '' : 's'}${status ? ` ${status}` : ''} (this token's user).` : `${rows.size} shown (this token's user).`;
            if (rows.size === 0)
                tbody.append(h('tr', { class: 'empty' }, h('td', { colspan: 8 }, 'No jobs.')));
        }
        catch (e) {
            if (e.name === 'AbortError')
                return;
            count.replaceChildren(h('span', { class: 'error' }, `Jobs could not be listed: ${describe(e)}`));
        }
    }
    more.addEventListener('click', () => void load());
    void load();
    const unsubscribe = ctx.live.subscribe((ev) => {
        const j = ev.job;
        if (!j)
            return;
        if (status && j.status !== status) {
            rows.get(j.id)?.remove();
            rows.delete(j.id);
            return;
        }
        put(j, !rows.has(j.id));
    });
    return () => {
        abort.abort();
        unsubscribe();
    };
};
