// A function's answers, remembered for the keys it was asked lately: a parameter name, an address, a key, an origin.

/**
 * `compute`, remembering its answer for each key it was asked lately: at most `max` keys, all forgotten at once
 * when that many are kept, since the keys are the clients' to choose and none may be kept for good. A key whose
 * computation throws is not remembered: asked again, it throws again. `compute` must give the same answer for
 * the same key, and its answers are shared by every caller, so they must not be changed.
 */
export function remembered<K, V>(max: number, compute: (key: K) => V): (key: K) => V {
  const kept = new Map<K, V>();
  return (key) => {
    const known = kept.get(key);
    if (known !== undefined || kept.has(key)) return known as V;
    const value = compute(key);
    if (kept.size >= max) kept.clear();
    kept.set(key, value);
    return value;
  };
}
