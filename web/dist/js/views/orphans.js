// Orphans: jobs recovery would take back on its next run (a queued job
// nobody received, a running job whose worker went silent), with why.
import { describe } from '../api.js';
import { every } from '../ctx.js';
import { h, replace, timeEl } from '../dom.js';
const REASONS = {
    not_received: 'queued, never received: its message may be lost',
    no_heartbeat: 'running, no heartbeat: its worker died',
};
export const orphansView = (root, ctx) => {
    const info = h('p', { class: 'muted', 'data-testid': 'orphans-count' }, 'Loading…');
    const tbody = h('tbody');
    replace(root, h('h1', null, 'Orphans'), h('p', null, 'Jobs recovery will send again (or fail when their runs are exhausted) on its next run. A paused tier\'s queued jobs are waiting, not orphans.'), info, h('table', { class: 'data' }, h('caption', { class: 'visually-hidden' }, 'Orphaned jobs'), h('thead', null, h('tr', null, ['Job', 'Owner', 'Tier', 'Status', 'Since', 'Reason'].map((t) => h('th', { scope: 'col' }, t)))), tbody));
    async function load() {
        try {
            const res = await ctx.api.get('/v1/admin/orphans');
            const list = res.orphans ?? [];
            info.textContent = list.length === 0 ? 'No orphans.' : `${list.length} orphan${list.length === 1 ? '' : 's'}.`;
            replace(tbody, list.map((o) => h('tr', { 'data-job': o.jobId, 'data-reason': o.reason }, h('th', { scope: 'row' }, h('a', { href: `#/inspector/${encodeURIComponent(o.jobId)}` }, h('code', null, o.jobId))), h('td', null, o.owner), h('td', null, o.tier), h('td', null, o.status), h('td', null, timeEl(o.since)), h('td', { title: o.reason }, REASONS[o.reason] ?? o.reason))));
        }
        catch (e) {
            info.replaceChildren(h('span', { class: 'error', role: 'alert' }, `The orphans could not be read: ${describe(e)}`));
        }
    }
    return every(10_000, load);
};
