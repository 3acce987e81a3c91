// A tier's dead-letter queue: a peek at its messages, and redrive (the
// selected ones or all) back to the tier's queue.
import { describe } from '../api.js';
import { every } from '../ctx.js';
import { h, replace, timeEl } from '../dom.js';
import { TIERS } from '../types.js';
export const dlqView = (root, ctx, params) => {
    const tier = TIERS.includes(params['tier'] ?? '') ? params['tier'] : 'high';
    const tabs = h('nav', { class: 'filters', 'aria-label': 'Tier' }, h('ul', null, TIERS.map((t) => h('li', null, h('a', { href: `#/dlq/${t}`, 'aria-current': t === tier ? 'page' : undefined }, t)))));
    const info = h('p', { class: 'muted', 'data-testid': 'dlq-count' }, 'Loading…');
    const tbody = h('tbody');
    const all = h('input', { type: 'checkbox', id: 'dlq-all', 'aria-label': 'Select every message' });
    const redriveSel = h('button', { type: 'button', disabled: true }, 'Redrive selected');
    const redriveAll = h('button', { type: 'button' }, `Redrive all of ${tier}`);
    const refreshBtn = h('button', { type: 'button', class: 'secondary' }, 'Refresh');
    replace(root, h('h1', null, 'Dead-letter queues'), tabs, h('p', null, `Messages that failed delivery ${tier === 'system' ? '(webhooks and other system work)' : ''} too often land in the ${tier} tier's DLQ. Redrive moves them back to the ${tier} queue.`), h('div', { class: 'actions' }, redriveSel, redriveAll, refreshBtn), info, h('table', { class: 'data' }, h('caption', { class: 'visually-hidden' }, `Messages in the ${tier} dead-letter queue`), h('thead', null, h('tr', null, h('th', { scope: 'col' }, all), ...['Job', 'Kind', 'Job status', 'Attempts', 'Receives', 'Error', 'Sent'].map((t) => h('th', { scope: 'col' }, t)))), tbody));
    const boxes = () => [...tbody.querySelectorAll('input[type=checkbox]')];
    const sync = () => {
        const sel = boxes().filter((b) => b.checked);
        redriveSel.disabled = sel.length === 0;
        all.checked = sel.length > 0 && sel.length === boxes().length;
    };
    all.addEventListener('change', () => {
        for (const b of boxes())
            b.checked = all.checked;
        sync();
    });
    let busy = false;
    async function load() {
        if (busy)
            return;
        try {
            const res = await ctx.api.get(`/v1/admin/dlq/${tier}?limit=50`);
            const checked = new Set(boxes().filter((b) => b.checked).map((b) => b.value));
            const msgs = res.messages ?? [];
            info.textContent = msgs.length === 0 ? `The ${tier} DLQ is empty.` : `${msgs.length} message${msgs.length === 1 ? '' : 's'} shown (a peek: at most 50).`;
            redriveAll.disabled = msgs.length === 0;
            replace(tbody, msgs.map((m, i) => h('tr', { 'data-job': m.jobId }, h('td', null, h('input', { type: 'checkbox', value: m.jobId, checked: checked.has(m.jobId), 'aria-label': `Select ${m.jobId}`, id: `dlq-${i}`, onchange: sync })), h('th', { scope: 'row' }, m.jobId ? h('a', { href: `#/jobs/${encodeURIComponent(m.jobId)}` }, h('code', null, m.jobId)) : '—'), h('td', null, m.kind ?? ''), h('td', null, m.status ?? ''), h('td', { class: 'num' }, String(m.attempts ?? 0)), h('td', { class: 'num' }, String(m.receiveCount ?? '')), h('td', null, m.error ? `${m.error.code}: ${m.error.message}` : ''), h('td', null, timeEl(m.sentAt)))));
            sync();
        }
        catch (e) {
            info.replaceChildren(h('span', { class: 'error' }, `The DLQ could not be read: ${describe(e)}`));
        }
    }
    async function redrive(jobIds) {
        busy = true;
        redriveSel.disabled = redriveAll.disabled = true;
        try {
            const res = await ctx.api.post(`/v1/admin/dlq/${tier}/redrive`, jobIds ? { jobIds } : undefined);
            ctx.notify(`Moved ${res.moved} message${res.moved === 1 ? '' : 's'} from the ${tier} DLQ back to its queue.`);
        }
        catch (e) {
            ctx.notify(`Redrive failed: ${describe(e)}`, 'error');
        }
        finally {
            busy = false;
            redriveAll.disabled = false;
            await load();
        }
    }
    redriveSel.addEventListener('click', () => void redrive(boxes().filter((b) => b.checked).map((b) => b.value)));
    redriveAll.addEventListener('click', () => void redrive());
    refreshBtn.addEventListener('click', () => void load());
    const stop = every(10_000, load);
    return stop;
};
