package Catmandu::Store::RecordFile;

# A Catmandu store for driving Dancer::Plugin::Catmandu::OAI (Debian's
# third-party OAI-PMH provider) without Elasticsearch or MongoDB, neither of
# which Debian 12 ships: the records are a JSON file, read at every search,
# and the searches answer the subset of CQL the provider sends (and'ed
# terms: cql.allRecords, datestamp >= / <=, _id exact, setSpec =). The
# protocol, its tokens and its XML are the provider's.

use Catmandu::Sane;
use Moo;
use Catmandu::Store::RecordFile::Bag;

with 'Catmandu::Store';

has file => (is => 'ro', required => 1);

1;
