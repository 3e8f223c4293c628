#!/usr/bin/env python3
"""Session 18: reads ncu's source page (`ncu --import R --page source --print-source sass --csv`,
gzipped) of one or more kernels and prints, per kernel, the warp-stall sampling by reason, the
executed instructions per HGMMA by opcode, the samples by opcode, and the most-sampled
instructions with their top stall reasons.

    python3 analyse_sass.py dualkv_sass.csv.gz fa4_sass.csv.gz [--top N]
"""
import collections
import csv
import gzip
import sys
def kernels(path):
    rows=list(csv.reader(gzip.open(path,'rt')))
    out=[];cur=None;hdr=None
    for r in rows:
        if r and r[0]=='Kernel Name':
            cur={'name':r[1],'lines':[]};out.append(cur);hdr=None;continue
        if r and r[0]=='Address': hdr=r;continue
        if cur is not None and hdr and len(r)==len(hdr):
            cur['lines'].append(dict(zip(hdr,r)))
    return out
def num(x):
    try: return float(x)
    except: return 0.0
def opclass(src):
    op=src.strip().split()[0] if src.strip() else ''
    if op.startswith('@'): op=src.strip().split()[1]
    base=op.split('.')[0]
    return base, op

def top_instructions(kernel, count):
    lines = kernel["lines"]
    total = sum(num(l["Warp Stall Sampling (All Samples)"]) for l in lines)
    reasons = [c for c in lines[0] if c.startswith("stall_") and "Not Issued" not in c]
    for index, l in sorted(enumerate(lines), key=lambda x: -num(x[1]["Warp Stall Sampling (All Samples)"]))[:count]:
        samples = num(l["Warp Stall Sampling (All Samples)"])
        top = sorted(((num(l[c]), c[6:]) for c in reasons), reverse=True)[:3]
        print("   %5d %5.2f%% %12d  %-60s %s" % (index, 100 * samples / total, num(l["Instructions Executed"]),
              l["Source"].strip()[:60], " ".join("%s:%.0f%%" % (c, 100 * v / max(samples, 1)) for v, c in top)))


def summary(path, kernel):
    lines = kernel["lines"]
    total = sum(num(l["Warp Stall Sampling (All Samples)"]) for l in lines)
    hgmma = sum(num(l["Instructions Executed"]) for l in lines if "HGMMA" in l["Source"])
    executed = sum(num(l["Instructions Executed"]) for l in lines)
    print("==", path.split("/")[-1], kernel["name"][:60], "| samples", int(total), "instructions", int(executed),
          "HGMMA", int(hgmma), "instructions per HGMMA %.1f" % (executed / max(hgmma, 1)))
    reasons = [c for c in lines[0] if c.startswith("stall_") and "Not Issued" not in c]
    by_reason = {c: sum(num(l[c]) for l in lines) for c in reasons}
    print("   stall reasons (% of samples):", ", ".join("%s %.1f" % (c[6:], 100 * v / total)
          for c, v in sorted(by_reason.items(), key=lambda x: -x[1]) if v / total > 0.01))
    executed_by_op, samples_by_op = collections.Counter(), collections.Counter()
    for l in lines:
        op, _ = opclass(l["Source"])
        executed_by_op[op] += num(l["Instructions Executed"])
        samples_by_op[op] += num(l["Warp Stall Sampling (All Samples)"])
    print("   executed per HGMMA:", ", ".join("%s %.2f" % (c, v / hgmma) for c, v in executed_by_op.most_common(22)))
    print("   samples by opcode:", ", ".join("%s %.1f%%" % (c, 100 * v / total) for c, v in samples_by_op.most_common(16)))


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if not a.startswith("--top")]
    count = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 25
    arguments = [a for a in arguments if a != str(count) or a.endswith(".gz")]
    for path in arguments:
        for kernel in kernels(path):
            summary(path, kernel)
            top_instructions(kernel, count)
