/**
 * A bench's numeric option: `--name V` on the command line, else the
 * environment's FLEET_NAME, else the default. Anything but a positive number
 * is refused naming the option.
 */
export function positiveArg(name: string, def: number, argv: readonly string[] = process.argv): number {
  const i = argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(argv[i + 1]) : Number(process.env[`FLEET_${name.toUpperCase()}`] ?? def);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} must be a positive number`);
  return v;
}
