// The dashboard: sign in, then a shell (header, navigation, live state)
// around hash-routed views, so the same static files work under any path
// (/dashboard/ locally, the bucket behind the API in AWS).

import { Api, claimsOf, clearSession, loadSession, saveSession, type Session } from './api.js';
import type { Cleanup, Ctx, View } from './ctx.js';
import { h, replace } from './dom.js';
import { Live } from './live.js';
import { breakersView } from './views/breakers.js';
import { dlqView } from './views/dlq.js';
import { jobView } from './views/job.js';
import { inspectedJobView, inspectorView } from './views/inspector.js';
import { jobsView } from './views/jobs.js';
import { loginView } from './views/login.js';
import { orphansView } from './views/orphans.js';
import { overviewView } from './views/overview.js';

const app = document.getElementById('app')!;
let cleanup: Cleanup | null = null;
let live: Live | null = null;
let onHash: (() => void) | null = null;

interface Route {
  view: View;
  params: Record<string, string>;
  nav: string;
}

function route(hash: string): Route {
  const raw = hash.replace(/^#/, '') || '/';
  const [path = '/', query = ''] = raw.split('?', 2);
  const params: Record<string, string> = Object.fromEntries(new URLSearchParams(query));
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'jobs' && parts[1]) return { view: jobView, params: { ...params, id: parts[1] }, nav: 'jobs' };
  if (parts[0] === 'jobs') return { view: jobsView, params, nav: 'jobs' };
  if (parts[0] === 'dlq') return { view: dlqView, params: { ...params, tier: parts[1] ?? 'high' }, nav: 'dlq' };
  if (parts[0] === 'inspector' && parts[1]) return { view: inspectedJobView, params: { ...params, id: parts[1] }, nav: 'inspector' };
  if (parts[0] === 'inspector') return { view: inspectorView, params, nav: 'inspector' };
  if (parts[0] === 'orphans') return { view: orphansView, params, nav: 'orphans' };
  if (parts[0] === 'breakers') return { view: breakersView, params, nav: 'breakers' };
  return { view: overviewView, params, nav: 'overview' };
}

function signOut(message?: string): void {
  cleanup?.();
  cleanup = null;
  live?.stop();
  live = null;
  if (onHash) window.removeEventListener('hashchange', onHash);
  onHash = null;
  clearSession();
  document.title = 'Conveyor — sign in';
  loginView(app, start, message);
}

function start(session: Session): void {
  const api = new Api(session);
  api.onUnauthorized = () => signOut('The API refused the token (expired or invalid). Sign in again.');
  live = new Live(api);
  const claims = claimsOf(session.token);

  const status = h('div', { class: 'toast', role: 'status', 'aria-live': 'polite', 'data-testid': 'notice' });
  const alert = h('div', { class: 'toast error', role: 'alert', 'data-testid': 'alert' });
  const liveState = h('span', { class: 'live', 'data-testid': 'live-state', 'data-state': 'closed' }, 'offline');
  const links: Record<string, HTMLAnchorElement> = {
    overview: h('a', { href: '#/' }, 'Overview'),
    jobs: h('a', { href: '#/jobs' }, 'Jobs'),
    inspector: h('a', { href: '#/inspector' }, 'Search'),
    orphans: h('a', { href: '#/orphans' }, 'Orphans'),
    dlq: h('a', { href: '#/dlq/high' }, 'DLQ'),
    breakers: h('a', { href: '#/breakers' }, 'Breakers'),
  };
  const main = h('main', { id: 'view', tabindex: '-1' });
  replace(
    app,
    h('a', { class: 'skip', href: '#view', onclick: (e: Event) => (e.preventDefault(), main.focus()) }, 'Skip to content'),
    h(
      'header',
      { class: 'top' },
      h('span', { class: 'brand' }, 'Conveyor'),
      h('nav', { 'aria-label': 'Main' }, h('ul', null, Object.values(links).map((a) => h('li', null, a)))),
      h('div', { class: 'who' }, liveState, ' ', h('span', { class: 'muted' }, claims?.sub ? `${claims.sub} (${claims.role ?? '?'})` : ''), ' ', h('button', { type: 'button', class: 'secondary', onclick: () => signOut() }, 'Sign out')),
    ),
    main,
    status,
    alert,
  );

  let toastTimer: ReturnType<typeof setTimeout> | undefined;
  const ctx: Ctx = {
    api,
    live,
    notify(message, kind = 'info') {
      const el = kind === 'error' ? alert : status;
      (kind === 'error' ? status : alert).textContent = '';
      el.textContent = message;
      if (toastTimer !== undefined) clearTimeout(toastTimer);
      toastTimer = setTimeout(() => {
        status.textContent = '';
        alert.textContent = '';
      }, kind === 'error' ? 12_000 : 6000);
    },
    navigate(hash) {
      if (location.hash === hash) show();
      else location.hash = hash;
    },
  };

  live.onState((s, d) => {
    liveState.dataset['state'] = s;
    liveState.textContent = s === 'open' ? '● live' : s === 'connecting' ? '○ connecting' : s === 'retrying' ? '○ reconnecting' : s === 'refused' ? '○ stream refused' : '○ offline';
    liveState.title = d ?? '';
  });
  live.start();

  function show(): void {
    cleanup?.();
    const r = route(location.hash);
    for (const [k, a] of Object.entries(links)) {
      if (k === r.nav) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    document.title = `Conveyor — ${r.nav}`;
    main.replaceChildren();
    delete main.dataset['loaded'];
    cleanup = r.view(main, ctx, r.params);
  }
  onHash = show;
  window.addEventListener('hashchange', show);
  show();
}

// On the local stack the gateway hands the dashboard a session (an admin
// token and the stream's origin, GET sign-in.json next to this page); it
// answers 404 anywhere else, and the sign-in form shows.
async function localSession(): Promise<Session | null> {
  try {
    const r = await fetch('sign-in.json', { headers: { Accept: 'application/json' }, cache: 'no-store', credentials: 'omit' });
    if (!r.ok) return null;
    const s = (await r.json()) as Partial<Session>;
    if (typeof s.token !== 'string' || !s.token) return null;
    return { token: s.token, apiBase: s.apiBase ?? '', eventsBase: s.eventsBase ?? '' };
  } catch {
    return null;
  }
}

async function boot(): Promise<void> {
  const saved = loadSession();
  const claims = saved ? claimsOf(saved.token) : null;
  if (saved && !(claims?.exp && claims.exp * 1000 < Date.now())) {
    start(saved);
    return;
  }
  const local = await localSession();
  if (local) {
    saveSession(local);
    document.body.dataset['signedIn'] = 'local';
    start(local);
    return;
  }
  loginView(app, start);
}

void boot();
