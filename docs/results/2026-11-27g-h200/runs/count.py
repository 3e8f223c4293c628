import math
R0=[1312,2038,2027,1006,546,1504,1694,1866,917,1473,515,1128,1727,1788,607,1495,743,724,528,789,2029,411,1931,418,1420,1115,666,1525,514,901,308,481]
P=8192; G=4; M=64; N=128
def counts(R, grid):
    # backward steps per KV head (G heads)
    prompt_tiles = math.ceil(P/N)
    steps=0; partial=0
    total=sum(R)
    for t in range(prompt_tiles):
        kb=t*N
        # prompt causal part: query tiles from kb//M*M
        q=(kb//M)*M; n=math.ceil((P-q)/M); steps+=n*G
        if grid:
            n=math.ceil(total/M); steps+=n*G; partial+= (total%M!=0)*G
        else:
            for r in R: steps+=math.ceil(r/M)*G; partial+=(r%M!=0)*G
    # response tiles
    start=0
    for r in R:
        for t in range(math.ceil(r/N)):
            kb=start+t*N
            if grid:
                q0=(kb//M)*M; e=start+r
                n=math.ceil((e-q0)/M)
                partial += G*((q0<start) + ((e-q0)%M!=0))
            else:
                q0=start+((kb-start)//M)*M; n=math.ceil((start+r-q0)/M); partial+=G*(r%M!=0)
            steps+=n*G
        start+=r
    return steps, partial
a=counts(R0,False); b=counts(R0,True)
print("segment grid", a, "run grid", b, "steps saved %.2f%%"%(100*(1-b[0]/a[0])))
# useful pairs
R=R0; useful = P*(P+1)/2 + sum(R)*P + sum(r*(r+1)/2 for r in R)
print("useful per head", useful, "executed current", a[0]/G*M*N, "ratio", useful/(a[0]/G*M*N))
R=R0
# forward: query tiles of 128 walk prompt key tiles (64) + own response key tiles up to the tile
fw_seg = sum(math.ceil(r/128)*64 + sum(t+1 for t in range(math.ceil(r/128))) for r in R)
T=sum(R); fw_run = math.ceil(T/128)*64 + fw_seg - sum(math.ceil(r/128) for r in R)*64  # approx own part same
print("fwd blocks seg grid", fw_seg, "run grid approx", fw_run, "saved %.2f%%"%(100*(1-fw_run/fw_seg)))
