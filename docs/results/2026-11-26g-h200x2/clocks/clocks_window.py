"""Mean SM clock and power per GPU over the last `steps` x step-time seconds of each method's
window (the timed steps), from nvidia-smi's 100 ms samples (smi.csv) and WINDOW lines."""
import csv, datetime, re, statistics, sys, collections
folder, steps = sys.argv[1], int(sys.argv[2])
step_time = dict(zip(sys.argv[3].split(','), map(float, sys.argv[4].split(','))))
rows = collections.defaultdict(list)
for r in csv.reader(open(f'{folder}/smi.csv')):
    try:
        t = datetime.datetime.strptime(r[0].strip(), '%Y/%m/%d %H:%M:%S.%f').replace(tzinfo=datetime.timezone.utc).timestamp()
        vals = [float(x.split()[0]) for x in r[1:]]
    except (ValueError, IndexError):
        continue
    gpu = int(vals[0]) if len(vals) == 4 else 0
    rows[gpu].append((t, *vals[-3:]))
windows = re.findall(r'WINDOW (?:rank (\d) )?([\d.]+) ([\d.]+)', open(f'{folder}/log.txt').read())
ends = []
for rank, a, b in windows:
    if rank in ('', '0'): ends.append(float(b))
for (name, st), end in zip(step_time.items(), ends):
    for gpu in sorted(rows):
        sel = [r for r in rows[gpu] if end - steps * st <= r[0] <= end]
        print(f"{name:14s} gpu {gpu}: {len(sel)} samples, SM clock mean {statistics.mean(r[1] for r in sel):.0f} MHz, "
              f"power mean {statistics.mean(r[2] for r in sel):.0f} W, temperature {statistics.mean(r[3] for r in sel):.0f} C")
