/**
 * A preload module that moves one process's wall clock, as an NTP step or a wrong RTC would, for
 * the fleet's clock-fault tests. Loaded with `NODE_OPTIONS=--import <this file>` (after tsx, which
 * the test servers load with `--import tsx`) and pointed at a file by CLOCK_SHIFT_FILE; the file
 * holds the offset in milliseconds (an integer; missing or empty means 0).
 *
 *  - At start-up the offset in the file moves everything a booting process reads from the wall
 *    clock: Date.now(), `new Date()` and performance.timeOrigin (a node booted while its clock was
 *    wrong carries that error in timeOrigin for its whole life).
 *  - On SIGUSR2 the file is read again and Date.now() / `new Date()` jump to the new offset: a
 *    clock stepped while the process runs. performance.timeOrigin, performance.now() and timers
 *    stay as they were, as they do on a real system (they are monotonic).
 * Each change is acknowledged on stderr with `clock-shift: offset <ms>` so a test can wait for it.
 */
import fs from 'node:fs';

const file = process.env.CLOCK_SHIFT_FILE;
if (file) {
  const RealDate = Date;
  const realNow = RealDate.now.bind(RealDate);
  const readOffset = (): number => {
    let text = '';
    try {
      text = fs.readFileSync(file, 'utf8').trim();
    } catch {
      text = '';
    }
    const ms = text === '' ? 0 : Number(text);
    if (!Number.isSafeInteger(ms)) throw new Error(`clock-shift: ${file} must hold an integer of milliseconds, not ${JSON.stringify(text)}`);
    return ms;
  };
  let offsetMs = readOffset();
  const bootOffsetMs = offsetMs;
  if (bootOffsetMs !== 0) Object.defineProperty(performance, 'timeOrigin', { value: performance.timeOrigin + bootOffsetMs, configurable: true });
  const shiftedNow = (): number => realNow() + offsetMs;
  // `new Date()` without arguments and `Date()` read the shifted clock; everything else is Date's own.
  const ShiftedDate: DateConstructor = new Proxy(RealDate, {
    construct(target, args, newTarget): object {
      return Reflect.construct(target, args.length === 0 ? [shiftedNow()] : args, newTarget === ShiftedDate ? target : newTarget);
    },
    apply() {
      return new RealDate(shiftedNow()).toString();
    },
    get(target, key, receiver) {
      if (key === 'now') return shiftedNow;
      return Reflect.get(target, key, receiver);
    },
  });
  globalThis.Date = ShiftedDate;
  const announce = () => process.stderr.write(`clock-shift: offset ${offsetMs}\n`);
  process.on('SIGUSR2', () => {
    offsetMs = readOffset();
    announce();
  });
  announce();
}
