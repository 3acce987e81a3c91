// The inspector: operators search every user's jobs by status, tier,
// owner, type, error code and creation window (GET /v1/admin/jobs), with
// the total count (X-Total-Count) and a cursor for more; they select jobs
// (or every job matching the search) and retry or cancel them in bulk.

import { describe } from '../api.js';
import { bulkPanel, type BulkFilter } from '../bulk.js';
import type { View } from '../ctx.js';
import { badge, h, replace, timeEl } from '../dom.js';
import { JOB_STATUSES, TIERS, type Job } from '../types.js';

const PAGE = 50;
const FIELDS = ['status', 'tier', 'owner', 'type', 'errorCode', 'createdFrom', 'createdTo'] as const;

type OwnedJob = Job & { owner: string };

export const inspectorView: View = (root, ctx, params) => {
  const abort = new AbortController();
  const select = (name: string, options: readonly string[]) =>
    h('select', { id: `insp-${name}`, name }, ['', ...options].map((o) => h('option', { value: o, selected: params[name] === o ? true : undefined }, o || 'any')));
  const text = (name: string, placeholder: string) =>
    h('input', { id: `insp-${name}`, name, type: 'search', placeholder, autocomplete: 'off', spellcheck: 'false', value: params[name] ?? '' });
  const controls: Record<(typeof FIELDS)[number], HTMLInputElement | HTMLSelectElement> = {
    status: select('status', JOB_STATUSES),
    tier: select('tier', TIERS),
    owner: text('owner', 'user id'),
    type: text('type', 'publish'),
    errorCode: text('errorCode', 'attempts_exhausted'),
    createdFrom: text('createdFrom', '2026-01-01T00:00:00Z'),
    createdTo: text('createdTo', '2026-01-31T23:59:59Z'),
  };
  const form = h(
    'form',
    { class: 'search', role: 'search', 'aria-label': 'Search jobs across users', 'data-testid': 'inspector-form' },
    FIELDS.map((f) => h('label', { for: `insp-${f}` }, f, ' ', controls[f])),
    h('button', { type: 'submit' }, 'Search'),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const f of FIELDS) {
      const v = controls[f].value.trim();
      if (v) q.set(f, v);
    }
    ctx.navigate(`#/inspector${q.size ? `?${q}` : ''}`);
  });

  const count = h('p', { class: 'muted', 'data-testid': 'inspector-count' }, 'Loading…');
  const tbody = h('tbody');
  const more = h('button', { type: 'button', hidden: true }, 'Load more');
  const all = h('input', { type: 'checkbox', id: 'insp-all', 'aria-label': 'Select every job shown' });
  const boxes = (): HTMLInputElement[] => [...tbody.querySelectorAll<HTMLInputElement>('input[type=checkbox]')];
  const bulk = bulkPanel(ctx, {
    selected: () => boxes().filter((b) => b.checked).map((b) => b.value),
    filter: () => bulkFilter(params),
    changed: () => reload(),
  });
  const sync = () => {
    const bs = boxes();
    const n = bs.filter((b) => b.checked).length;
    all.checked = n > 0 && n === bs.length;
    all.indeterminate = n > 0 && n < bs.length;
    bulk.sync();
  };
  all.addEventListener('change', () => {
    for (const b of boxes()) b.checked = all.checked;
    sync();
  });
  replace(
    root,
    h('h1', null, 'Search jobs'),
    form,
    bulk.el,
    count,
    h(
      'table',
      { class: 'data' },
      h('caption', { class: 'visually-hidden' }, 'Jobs of every user'),
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, all), ['Job', 'Owner', 'Status', 'Tier', 'Type', 'Error', 'Created'].map((t) => h('th', { scope: 'col' }, t)))),
      tbody,
    ),
    more,
  );

  let cursor: string | null = null;
  // Reads the first page again (after a bulk action), keeping the selection
  // of the jobs still listed.
  function reload(): void {
    cursor = null;
    void load(true);
  }
  async function load(fresh = false): Promise<void> {
    const q = new URLSearchParams({ limit: String(PAGE) });
    for (const f of FIELDS) if (params[f]) q.set(f, params[f]!);
    if (cursor) q.set('cursor', cursor);
    try {
      const { data, response } = await ctx.api.request<{ jobs: OwnedJob[]; nextCursor: string | null }>('GET', `/v1/admin/jobs?${q}`, undefined, abort.signal);
      const checked = new Set(boxes().filter((b) => b.checked).map((b) => b.value));
      if (fresh) tbody.replaceChildren();
      for (const j of data.jobs) {
        tbody.append(
          h(
            'tr',
            { 'data-job': j.id, 'data-owner': j.owner, 'data-status': j.status },
            h('td', null, h('input', { type: 'checkbox', value: j.id, checked: checked.has(j.id), 'aria-label': `Select ${j.id}`, onchange: sync })),
            h('th', { scope: 'row' }, h('a', { href: `#/inspector/${encodeURIComponent(j.id)}` }, h('code', null, j.id))),
            h('td', null, j.owner),
            h('td', null, badge(j.status)),
            h('td', null, j.tier),
            h('td', null, j.type),
            h('td', null, j.error?.code ?? ''),
            h('td', null, timeEl(j.createdAt)),
          ),
        );
      }
      cursor = data.nextCursor;
      more.hidden = !cursor;
      const total = response.headers.get('X-Total-Count') ?? '?';
      count.textContent = `${total} job${total === '1' ? '' : 's'} match (every user).`;
      sync();
    } catch (e) {
      if ((e as Error).name === 'AbortError') return;
      count.replaceChildren(h('span', { class: 'error', role: 'alert' }, `The search failed: ${describe(e)}`));
    }
  }
  more.addEventListener('click', () => void load());
  void load();
  return () => abort.abort();
};

// The search as the bulk routes' filter: they take status (required), tier,
// owner, type and errorCode, not the creation window.
function bulkFilter(params: Record<string, string>): { filter: BulkFilter | null; why: string } {
  if (!params['status']) return { filter: null, why: 'To act on every job matching the search, search by a status first.' };
  if (params['createdFrom'] || params['createdTo']) return { filter: null, why: 'Acting on every match takes no creation window: clear createdFrom and createdTo to act by filter.' };
  const filter: BulkFilter = { status: params['status'] };
  for (const f of ['tier', 'owner', 'type', 'errorCode'] as const) if (params[f]) filter[f] = params[f];
  return { filter, why: '' };
}

// One job of any user, with its owner and events (GET /v1/admin/jobs/{id}).
export const inspectedJobView: View = (root, ctx, params) => {
  const id = params['id'] ?? '';
  const abort = new AbortController();
  replace(root, h('h1', null, h('code', null, id)), h('p', { class: 'muted' }, 'Loading…'));
  void (async () => {
    try {
      const { data: j } = await ctx.api.request<OwnedJob & { events: { seq: number; type: string; at: string }[] }>(
        'GET', `/v1/admin/jobs/${encodeURIComponent(id)}`, undefined, abort.signal);
      replace(
        root,
        h('h1', null, h('code', null, j.id)),
        h('dl', { class: 'facts', 'data-testid': 'inspected-job' },
          h('dt', null, 'Owner'), h('dd', { 'data-testid': 'owner' }, j.owner),
          h('dt', null, 'Status'), h('dd', null, badge(j.status)),
          h('dt', null, 'Tier'), h('dd', null, j.tier),
          h('dt', null, 'Error'), h('dd', null, j.error ? `${j.error.code}: ${j.error.message}` : '—')),
        h('h2', null, 'Events'),
        h('ol', { 'data-testid': 'job-events' }, j.events.map((ev) => h('li', null, timeEl(ev.at), ' ', h('code', null, ev.type)))),
      );
    } catch (e) {
      if ((e as Error).name === 'AbortError') return;
      replace(root, h('h1', null, h('code', null, id)), h('p', { class: 'error', role: 'alert' }, describe(e)));
    }
  })();
  return () => abort.abort();
};
