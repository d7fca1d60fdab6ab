#!/usr/bin/env python3
"""The papers' example results under the fixed-latency and the queued memory, side by side.
Run from the repository root after make build:
    .venv/bin/python benches/policy_memory_models.py
Prints a Markdown table (docs/system.md "The papers' examples under both memory models")."""
import json, subprocess, sys, itertools, concurrent.futures as cf
runs = [("rocs/art.toml","rocs"),("rocs/swim.toml","rocs"),("azimi/corun.toml","mrc-partition"),("azimi/sharing.toml","thread-cluster"),("azimi/global-pollute.toml","global-pollute"),("coloris/recolor-c1.toml","coloris"),("coloris/overcommit.toml","coloris")]
def one(cfg, pol, model):
    out=f"/tmp/rm-{cfg.replace('/','_')}-{pol}-{model}.json"
    r=subprocess.run([".venv/bin/cachecolor","simulate","examples/"+cfg,"--policy",pol,"--set",f"machine.memory.model={model}","--json",out,"-q"],capture_output=True,text=True)
    if r.returncode: return (cfg,pol,model,None,r.stderr.strip()[-200:])
    d=json.load(open(out))
    return (cfg,pol,model,{p["name"]:p["ipc"] for p in d["processes"]},"")
jobs=[]
with cf.ThreadPoolExecutor(2) as ex:
    for cfg,pol in runs:
        for model in ("fixed","queued"):
            for p in ("linux",pol):
                jobs.append(ex.submit(one,cfg,p,model))
    res=[j.result() for j in jobs]
tab={}
for cfg,pol,model,ipc,err in res:
    if ipc is None: print("ERR",cfg,pol,model,err); continue
    tab[(cfg,pol,model)]=ipc
print("| config | policy | process | linux fixed | policy fixed | ratio | linux queued | policy queued | ratio |")
print("|---|---|---|---|---|---|---|---|---|")
for cfg,pol in runs:
    lf=tab.get((cfg,"linux","fixed")); pf=tab.get((cfg,pol,"fixed")); lq=tab.get((cfg,"linux","queued")); pq=tab.get((cfg,pol,"queued"))
    if not all([lf,pf,lq,pq]): continue
    for name in lf:
        print(f"| {cfg} | {pol} | {name} | {lf[name]:.4f} | {pf[name]:.4f} | {pf[name]/lf[name]:.3f} | {lq[name]:.4f} | {pq[name]:.4f} | {pq[name]/lq[name]:.3f} |")
