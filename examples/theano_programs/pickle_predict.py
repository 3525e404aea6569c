"""A Theano 1.1.2 program that trains a model, pickles its compiled predict function and
loads it in a new process."""

import os
import pickle
import subprocess
import sys
import tempfile

import numpy as np
import theano
import theano.tensor as tt

rng = np.random.RandomState(0)
data = rng.normal(size=(60, 4))
labels = (data @ np.array([1.0, -2.0, 0.5, 0.0]) > 0).astype("float64")
x, t = tt.dmatrix("x"), tt.dvector("t")
w = theano.shared(np.zeros(4), name="w")
b = theano.shared(0.0, name="b")
p = tt.nnet.sigmoid(tt.dot(x, w) + b)
cost = -(t * tt.log(p) + (1 - t) * tt.log(1 - p)).mean()
gw, gb = theano.grad(cost, [w, b])
train = theano.function([x, t], cost, updates=[(w, w - 0.5 * gw), (b, b - 0.5 * gb)])
for _ in range(100):
    train(data, labels)
predict = theano.function([x], p)

folder = tempfile.mkdtemp()
with open(os.path.join(folder, "predict.pkl"), "wb") as fh:
    pickle.dump(predict, fh)
np.save(os.path.join(folder, "data.npy"), data)
child = (
    "import pickle, numpy as np\n"
    f"f = pickle.load(open({os.path.join(folder, 'predict.pkl')!r}, 'rb'))\n"
    f"print(np.round(f(np.load({os.path.join(folder, 'data.npy')!r}))[:8], 6).tolist())\n"
    "print(sorted((s.name, np.round(s.get_value(), 6).tolist()) for s in f.get_shared()))\n"
)
out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
print(out.stdout.strip())
print(np.round(predict(data)[:8], 6).tolist())
print(sorted((s.name, np.round(s.get_value(), 6).tolist()) for s in (w, b)))
