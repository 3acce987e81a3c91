// The API client: the base URL and the bearer token of the session, JSON in
// and out, the contract's errors as ApiError.
export class ApiError extends Error {
    status;
    code;
    constructor(status, code, message) {
        super(message);
        this.status = status;
        this.code = code;
        this.name = 'ApiError';
    }
}
const KEY = 'conveyor.dashboard.session';
export function loadSession() {
    try {
        const raw = sessionStorage.getItem(KEY);
        if (!raw)
            return null;
        const s = JSON.parse(raw);
        if (typeof s.token !== 'string' || !s.token)
            return null;
        return { token: s.token, apiBase: s.apiBase ?? '', eventsBase: s.eventsBase ?? '' };
    }
    catch {
        return null;
    }
}
export function saveSession(s) {
    sessionStorage.setItem(KEY, JSON.stringify(s));
}
export function clearSession() {
    sessionStorage.removeItem(KEY);
}
// The token's claims, read without verifying (the API verifies): for
// display and to notice an expired token before the API says so.
export function claimsOf(token) {
    const parts = token.split('.');
    if (parts.length !== 3)
        return null;
    try {
        const b64 = parts[1].replace(/-/g, '+').replace(/_/g, '/');
        const json = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
        const c = JSON.parse(json);
        return c && typeof c === 'object' ? c : null;
    }
    catch {
        return null;
    }
}
export function trimBase(u) {
    return u.trim().replace(/\/+$/, '');
}
export class Api {
    session;
    // Called on a 401: the session is over.
    onUnauthorized = null;
    constructor(session) {
        this.session = session;
    }
    url(path) {
        return trimBase(this.session.apiBase) + path;
    }
    eventsUrl(path) {
        return trimBase(this.session.eventsBase || this.session.apiBase) + path;
    }
    headers(extra) {
        return { Authorization: `Bearer ${this.session.token}`, Accept: 'application/json', ...extra };
    }
    async request(method, path, body, signal) {
        const init = { method, headers: this.headers(), cache: 'no-store' };
        if (signal)
            init.signal = signal;
        if (body !== undefined) {
            init.headers = this.headers({ 'Content-Type': 'application/json' });
            init.body = JSON.stringify(body);
        }
        let response;
        try {
            response = await fetch(this.url(path), init);
        }
        catch (e) {
            if (e.name === 'AbortError')
                throw e;
            throw new ApiError(0, 'network', `The API did not answer (${e.message}).`);
        }
        const text = await response.text();
        let data = null;
        if (text) {
            try {
                data = JSON.parse(text);
            }
            catch {
                data = null;
            }
        }
        if (!response.ok) {
            const err = data?.error;
            if (response.status === 401 && this.onUnauthorized)
                this.onUnauthorized();
            throw new ApiError(response.status, err?.code ?? `http_${response.status}`, err?.message ?? `${method} ${path}: HTTP ${response.status}`);
        }
        return { data: data, response };
    }
    async get(path, signal) {
        return (await this.request('GET', path, undefined, signal)).data;
    }
    async post(path, body) {
        return (await this.request('POST', path, body)).data;
    }
}
// A human sentence for an error, with what to do where that is known.
export function describe(e) {
    if (e instanceof ApiError) {
        switch (e.status) {
            case 401:
                return 'The token was refused (missing, invalid or expired). Sign in again.';
            case 403:
                return `Not allowed with this token's role: ${e.message}`;
            case 404:
                return e.code === 'not_found' || e.code === 'http_404' ? `Not found: ${e.message}` : e.message;
        }
        return e.message;
    }
    return e instanceof Error ? e.message : String(e);
}
