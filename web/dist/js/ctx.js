// Runs fn now and every ms until the returned function is called; a run
// never overlaps the previous one.
export function every(ms, fn) {
    let stopped = false;
    let timer;
    const tick = async () => {
        if (stopped)
            return;
        try {
            await fn();
        }
        finally {
            if (!stopped)
                timer = setTimeout(tick, ms);
        }
    };
    void tick();
    return () => {
        stopped = true;
        if (timer !== undefined)
            clearTimeout(timer);
    };
}
// Coalesces bursts of calls into one call after ms.
export function debounce(ms, fn) {
    let timer;
    const d = () => {
        if (timer !== undefined)
            clearTimeout(timer);
        timer = setTimeout(() => {
            timer = undefined;
            fn();
        }, ms);
    };
    d.cancel = () => {
        if (timer !== undefined)
            clearTimeout(timer);
    };
    return d;
}
