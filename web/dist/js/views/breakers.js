// Circuit breakers with a record (the rest are closed with no failures),
// with a reset.
import { describe } from '../api.js';
import { every } from '../ctx.js';
import { badge, h, replace, timeEl } from '../dom.js';
export const breakersView = (root, ctx) => {
    const info = h('p', { class: 'muted', 'data-testid': 'breakers-count' }, 'Loading…');
    const tbody = h('tbody');
    replace(root, h('h1', null, 'Circuit breakers'), h('p', null, 'One breaker per external host and per access token. An open breaker refuses calls until its cooldown ends; then one probe decides. A reset closes it now.'), info, h('table', { class: 'data' }, h('caption', { class: 'visually-hidden' }, 'Circuit breakers'), h('thead', null, h('tr', null, ['Key', 'State', 'Failures', 'Open until', 'Updated', ''].map((t) => h('th', { scope: 'col' }, t || h('span', { class: 'visually-hidden' }, 'Action'))))), tbody));
    async function load() {
        try {
            const res = await ctx.api.get('/v1/admin/breakers');
            const list = res.breakers ?? [];
            info.textContent = list.length === 0 ? 'Every breaker is closed with no recent failures.' : `${list.length} breaker${list.length === 1 ? '' : 's'} with a record.`;
            replace(tbody, list.map((b) => h('tr', { 'data-key': b.key, 'data-state': b.state }, h('th', { scope: 'row' }, h('code', null, b.key)), h('td', null, badge(b.state)), h('td', { class: 'num' }, String(b.failures)), h('td', null, timeEl(b.openUntil)), h('td', null, timeEl(b.updatedAt)), h('td', null, h('button', { type: 'button', 'aria-label': `Reset ${b.key}`, onclick: () => void reset(b.key) }, 'Reset')))));
        }
        catch (e) {
            info.replaceChildren(h('span', { class: 'error' }, `The breakers could not be read: ${describe(e)}`));
        }
    }
    async function reset(key) {
        try {
            await ctx.api.post(`/v1/admin/breakers/${encodeURIComponent(key)}/reset`);
            ctx.notify(`Breaker ${key} reset: closed.`);
        }
        catch (e) {
            ctx.notify(`Could not reset ${key}: ${describe(e)}`, 'error');
        }
        await load();
    }
    return every(5000, load);
};
