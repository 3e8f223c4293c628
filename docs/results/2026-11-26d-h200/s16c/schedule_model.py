# Session 16: a model of the persistent Hopper forward's load balance (each work item costs its key
# blocks + 1): slowest CTA over the mean for the stride order (rr), the snake order and a greedy
# dynamic assignment, at the five design shapes. Plain Python, no GPU.
import heapq
def items(N,P,R=2048,bm=128,bn=128,G=4,Hk=8):
    tiles=[(t+1) for t in range(P//bm)]
    for n in range(N):
        for j in range(R//bm): tiles.append(P//bn + j+1)
    tiles.sort(reverse=True)
    per=[w for w in tiles for g in range(G)]
    return [per]*Hk
def rr(lists,C=132,snake=False):
    load=[0]*C; i=0
    flat=[w for l in lists for w in l]
    for r in range(0,len(flat),C):
        chunk=flat[r:r+C]
        rnd=r//C
        for b,w in enumerate(chunk):
            c = (C-1-b) if (snake and rnd%2) else b
            load[c]+=w+1.0  # +1: per-item overhead (Q load, epilogue) ~1 block
    return max(load)/(sum(load)/C)
def greedy(lists,C=132):
    h=[(0.0,c) for c in range(C)]
    for w in [w for l in lists for w in l]:
        l,c=heapq.heappop(h); heapq.heappush(h,(l+w+1.0,c))
    loads=[l for l,c in h]; return max(loads)/(sum(loads)/C)
for N,P in [(28,4096),(28,16384),(16,32768),(28,32768),(16,65536)]:
    L=items(N,P)
    print(N,P,"items",sum(len(l) for l in L),"rr %.4f snake %.4f greedy %.4f"%(rr(L),rr(L,snake=True),greedy(L)))
